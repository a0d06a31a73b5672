package memorytest

import (
	"context"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/dataplatform"
	"github.com/rushgate/rushgate/adapters/system"
	appcatalog "github.com/rushgate/rushgate/application/catalog"
	apporder "github.com/rushgate/rushgate/application/order"
	"github.com/rushgate/rushgate/application/payment"
	"github.com/rushgate/rushgate/domain/commerce/coupon"
	"github.com/rushgate/rushgate/domain/commerce/wallet"
)

// Shop is the product, cart, order and payment use cases on one Env, and the steps that set a
// purchase up: a product, a user with points, a held coupon, a placed order. Each step fails
// the test on an error, so a test reads as the purchase it sets up.
type Shop struct {
	*Env
	t        testing.TB
	Products *appcatalog.Service
	Orders   *apporder.Service
	Payments *payment.Service
}

// NewShop builds the commerce use cases on New(opts...).
func NewShop(t testing.TB, opts ...Option) *Shop {
	t.Helper()
	env := New(opts...)
	stores, ids := env.Stores, system.UUIDs{}
	return &Shop{
		Env: env, t: t,
		Products: appcatalog.NewService(appcatalog.Deps{Products: stores.Products, Clock: env.Clock, IDs: ids}),
		Orders: apporder.NewService(apporder.Deps{Tx: stores.Tx, Products: stores.Products, Carts: stores.Carts,
			Orders: stores.Orders, UserCoupons: stores.UserCoupons, Guard: env.Guard, Clock: env.Clock, IDs: ids}),
		Payments: payment.NewService(payment.Deps{Tx: stores.Tx, Orders: stores.Orders, Products: stores.Products,
			Stock: stores.Stock, Wallets: stores.Wallets, UserCoupons: stores.UserCoupons, Outbox: stores.Outbox,
			Messages: dataplatform.Encoder{}, Guard: env.Guard, Clock: env.Clock, IDs: ids}, payment.Config{}),
	}
}

// Product creates a product named "item" of price and stock and returns its id.
func (s *Shop) Product(price, stock int64) string {
	s.t.Helper()
	v, err := s.Products.Create(context.Background(), appcatalog.CreateCommand{Name: "item", Price: price, Stock: stock})
	if err != nil {
		s.t.Fatalf("create product: %v", err)
	}
	return v.ID
}

// User opens userID's account with balance points.
func (s *Shop) User(userID string, balance int64) {
	s.t.Helper()
	a, opening, err := wallet.Open(userID, balance, system.UUIDs{}.NewID(), s.Clock.Now())
	if err != nil {
		s.t.Fatalf("open account: %v", err)
	}
	if err := s.Stores.Tx.InTx(context.Background(), func(ctx context.Context) error {
		return s.Stores.Wallets.Create(ctx, a, opening)
	}); err != nil {
		s.t.Fatalf("store account: %v", err)
	}
}

// HoldCoupon stores a coupon of rate% expiring after ttl, issues it to userID, and returns the
// coupon's id and the id of userID's copy.
func (s *Shop) HoldCoupon(userID string, rate int, ttl time.Duration) (couponID, userCouponID string) {
	s.t.Helper()
	ctx, now := context.Background(), s.Clock.Now()
	c, err := coupon.New(system.UUIDs{}.NewID(), "sale", rate, 10, now.Add(ttl), now)
	if err != nil {
		s.t.Fatalf("new coupon: %v", err)
	}
	if err := s.Stores.Coupons.Create(ctx, c); err != nil {
		s.t.Fatalf("store coupon: %v", err)
	}
	held := c.Issue(system.UUIDs{}.NewID(), userID, now)
	if err := s.Stores.UserCoupons.Add(ctx, held); err != nil {
		s.t.Fatalf("issue coupon: %v", err)
	}
	return c.ID(), held.ID()
}

// Order puts quantity units of productID in userID's cart and places the order, naming
// couponID unless it is "".
func (s *Shop) Order(userID, productID string, quantity int, couponID string) apporder.View {
	s.t.Helper()
	ctx := context.Background()
	if _, err := s.Orders.AddToCart(ctx, apporder.AddToCartCommand{UserID: userID, ProductID: productID, Quantity: quantity}); err != nil {
		s.t.Fatalf("add to cart: %v", err)
	}
	cmd := apporder.PlaceCommand{UserID: userID}
	if couponID != "" {
		cmd.CouponID = &couponID
	}
	placed, err := s.Orders.Place(ctx, cmd)
	if err != nil {
		s.t.Fatalf("place order: %v", err)
	}
	return placed.Value
}
