package order_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/system"
	appcatalog "github.com/rushgate/rushgate/application/catalog"
	"github.com/rushgate/rushgate/application/guard"
	apporder "github.com/rushgate/rushgate/application/order"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce"
	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/coupon"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/ports"
)

// shop is the product, cart and order use cases on one in-memory database, with a clock the
// test moves.
type shop struct {
	t        *testing.T
	stores   ports.Stores
	clock    *memory.Clock
	products *appcatalog.Service
	orders   *apporder.Service
}

func newShop(t *testing.T) *shop {
	t.Helper()
	clock := memory.NewClock(time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC))
	stores := memory.NewStores(memory.NewDatabase())
	coord := memory.NewCoordination(clock)
	g := guard.New(guard.Deps{Idempotency: coord.Idempotency, Locker: coord.Locker, Clock: clock,
		Sleeper: memory.NewSleeper(clock), Tx: stores.Tx, Markers: stores.Markers}, guard.Config{})
	return &shop{
		t: t, stores: stores, clock: clock,
		products: appcatalog.NewService(appcatalog.Deps{Products: stores.Products, Clock: clock, IDs: system.UUIDs{}}),
		orders: apporder.NewService(apporder.Deps{Tx: stores.Tx, Products: stores.Products, Carts: stores.Carts,
			Orders: stores.Orders, UserCoupons: stores.UserCoupons, Guard: g, Clock: clock, IDs: system.UUIDs{}}),
	}
}

func (s *shop) product(price, stock int64) string {
	s.t.Helper()
	v, err := s.products.Create(context.Background(), appcatalog.CreateCommand{Name: "item", Price: price, Stock: stock})
	require.NoError(s.t, err)
	return v.ID
}

func (s *shop) add(user, productID string, quantity int) (apporder.CartItemView, error) {
	return s.orders.AddToCart(context.Background(), apporder.AddToCartCommand{UserID: user, ProductID: productID, Quantity: quantity})
}

// holdCoupon stores a coupon of rate% expiring after ttl and issues it to user.
func (s *shop) holdCoupon(user string, rate int, ttl time.Duration) (couponID, userCouponID string) {
	s.t.Helper()
	ctx := context.Background()
	c, err := coupon.New(system.UUIDs{}.NewID(), "sale", rate, 10, s.clock.Now().Add(ttl), s.clock.Now())
	require.NoError(s.t, err)
	require.NoError(s.t, s.stores.Coupons.Create(ctx, c))
	uc := c.Issue(system.UUIDs{}.NewID(), user, s.clock.Now())
	require.NoError(s.t, s.stores.UserCoupons.Add(ctx, uc))
	return c.ID(), uc.ID()
}

func (s *shop) place(user string, couponID *string) (apporder.View, error) {
	res, err := s.orders.Place(context.Background(), apporder.PlaceCommand{UserID: user, CouponID: couponID})
	return res.Value, err
}

func (s *shop) cart(user string) apporder.CartView {
	s.t.Helper()
	c, err := s.orders.Cart(context.Background(), user)
	require.NoError(s.t, err)
	return c
}

func TestPlace_AppliesAHeldCouponRoundingTheDiscountDown(t *testing.T) {
	s := newShop(t)
	p, q := s.product(999, 10), s.product(5001, 10)
	_, err := s.add("u1", p, 3)
	require.NoError(t, err)
	_, err = s.add("u1", q, 1)
	require.NoError(t, err)
	couponID, _ := s.holdCoupon("u1", 15, time.Hour)

	placed, err := s.place("u1", &couponID)
	require.NoError(t, err)
	// 3 × 999 + 5001 = 7998; 15% = 1199.7, rounded down.
	assert.Equal(t, int64(7998), placed.SubtotalAmount)
	assert.Equal(t, int64(1199), placed.DiscountAmount)
	assert.Equal(t, int64(6799), placed.TotalAmount)
	assert.Equal(t, &couponID, placed.CouponID)
	assert.Equal(t, "PENDING", placed.Status)
	assert.Nil(t, placed.PaidAt)
	assert.Empty(t, s.cart("u1").Items)

	got, err := s.orders.Get(context.Background(), apporder.GetQuery{OrderID: placed.OrderID, UserID: "u1"})
	require.NoError(t, err)
	assert.Equal(t, placed, got)
}

func TestPlace_RefusesACouponTheUserCannotUseAndKeepsTheCart(t *testing.T) {
	s := newShop(t)
	p := s.product(1000, 10)
	_, err := s.add("u1", p, 2)
	require.NoError(t, err)
	expired, _ := s.holdCoupon("u1", 10, time.Minute)
	used, usedUC := s.holdCoupon("u1", 10, time.Hour)
	require.NoError(t, s.stores.UserCoupons.MarkUsed(context.Background(), usedUC, s.clock.Now()))
	othersCoupon, _ := s.holdCoupon("u2", 10, time.Hour)
	unknown := system.UUIDs{}.NewID()
	s.clock.Advance(time.Minute) // expired is valid strictly before its expiry

	for name, id := range map[string]string{"expired": expired, "used": used, "not held": othersCoupon, "unknown": unknown} {
		_, err := s.place("u1", &id)
		assert.ErrorIs(t, err, coupon.ErrInvalid, name)
	}
	before := s.cart("u1")
	assert.Len(t, before.Items, 1, "a refused order keeps the cart")
	_, err = s.place("u1", nil)
	require.NoError(t, err, "the same cart orders without a coupon")
}

func TestPlace_EmptyCartIsRefusedBeforeTheCoupon(t *testing.T) {
	s := newShop(t)
	unknown := system.UUIDs{}.NewID()
	_, err := s.place("never-added", &unknown)
	assert.ErrorIs(t, err, order.ErrEmptyCart)
	_, err = s.place("never-added", nil)
	assert.ErrorIs(t, err, order.ErrEmptyCart)
}

func TestPlace_MalformedCouponIDIsAValidationError(t *testing.T) {
	s := newShop(t)
	bad := "C001"
	_, err := s.place("u1", &bad)
	de, ok := domain.AsError(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, domain.CodeValidationFailed, de.Code)
	assert.Equal(t, "couponId", de.Details["field"])
}

func TestPlace_WithAKeyReplaysInsteadOfPlacingAgain(t *testing.T) {
	s := newShop(t)
	p := s.product(100, 10)
	_, err := s.add("u1", p, 1)
	require.NoError(t, err)
	cmd := apporder.PlaceCommand{UserID: "u1", IdempotencyKey: "k1"}
	first, err := s.orders.Place(context.Background(), cmd)
	require.NoError(t, err)
	assert.False(t, first.Replayed)
	again, err := s.orders.Place(context.Background(), cmd)
	require.NoError(t, err)
	assert.True(t, again.Replayed)
	assert.Equal(t, first.Value.OrderID, again.Value.OrderID)
	cmd.IdempotencyKey = "k2"
	_, err = s.orders.Place(context.Background(), cmd)
	assert.ErrorIs(t, err, order.ErrEmptyCart)
}

func TestAddToCart_RefusesWhatTheStockOrTheLimitsDoNotCover(t *testing.T) {
	s := newShop(t)
	p := s.product(100, 1000)
	_, err := s.add("u1", p, 999)
	require.NoError(t, err)
	_, err = s.add("u1", p, 2)
	assert.ErrorIs(t, err, domain.ErrValidation, "a line holds at most 1000 units")

	scarce := s.product(100, 3)
	_, err = s.add("u1", scarce, 4)
	assert.ErrorIs(t, err, catalog.ErrInsufficientStock)
	_, err = s.add("u1", system.UUIDs{}.NewID(), 1)
	assert.ErrorIs(t, err, catalog.ErrProductNotFound)

	dear := s.product(commerce.MaxAmount, 10)
	_, err = s.add("u1", dear, 1)
	assert.ErrorIs(t, err, commerce.ErrAmountOverflow, "the cart's total would leave the range of amounts")

	c := s.cart("u1")
	require.Len(t, c.Items, 1)
	assert.Equal(t, 999, c.Items[0].Quantity)
}

// TestAddToCart_ConcurrentAddsWhileOrderingLoseNothing races adds against orders of one cart:
// every unit added ends up either in exactly one order or still in the cart.
func TestAddToCart_ConcurrentAddsWhileOrderingLoseNothing(t *testing.T) {
	s := newShop(t)
	p := s.product(10, 100000)
	const adds, orders = 200, 20
	var wg sync.WaitGroup
	placed := make(chan apporder.View, orders)
	for range adds {
		wg.Go(func() {
			_, err := s.add("u1", p, 1)
			assert.NoError(t, err)
		})
	}
	for range orders {
		wg.Go(func() {
			v, err := s.place("u1", nil)
			if err == nil {
				placed <- v
				return
			}
			assert.True(t, errors.Is(err, order.ErrEmptyCart), "%v", err)
		})
	}
	wg.Wait()
	close(placed)
	units := 0
	for v := range placed {
		require.Len(t, v.Items, 1)
		units += v.Items[0].Quantity
	}
	if c := s.cart("u1"); len(c.Items) == 1 {
		units += c.Items[0].Quantity
	}
	assert.Equal(t, adds, units)
}

func TestGet_AnotherUsersOrderIsNotFoundButAnAdminSeesIt(t *testing.T) {
	s := newShop(t)
	p := s.product(100, 10)
	_, err := s.add("u1", p, 1)
	require.NoError(t, err)
	placed, err := s.place("u1", nil)
	require.NoError(t, err)
	_, err = s.orders.Get(context.Background(), apporder.GetQuery{OrderID: placed.OrderID, UserID: "u2"})
	assert.ErrorIs(t, err, order.ErrNotFound)
	got, err := s.orders.Get(context.Background(), apporder.GetQuery{OrderID: placed.OrderID, UserID: "admin", Admin: true})
	require.NoError(t, err)
	assert.Equal(t, placed, got)
}
