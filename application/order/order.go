package order

import (
	"context"
	"fmt"
	"time"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/guard/combine"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/ports"
)

// Deps are the ports and the guard the cart and order use cases run on.
type Deps struct {
	Tx          ports.TxRunner
	Products    ports.ProductRepository
	Carts       ports.CartRepository
	Orders      ports.OrderRepository
	UserCoupons ports.UserCouponRepository
	// Guard needs Deps.Tx and Deps.Markers: an order placed with a key commits its marker.
	Guard *guard.Guard
	Clock ports.Clock
	IDs   ports.IDGenerator
	// Permissions decides who may buy a restricted product (a raffle's prize); nil restricts
	// none.
	Permissions ports.PurchasePermissions
	// AddTimeout bounds a cart add from its arrival: its wait for a batch and the batch's
	// transaction together (the database's timeout), so adds queued behind a slow batch answer
	// within it too. Zero: only the transaction's own timeout.
	AddTimeout time.Duration
}

// Service runs the cart and order use cases.
type Service struct {
	tx          ports.TxRunner
	products    ports.ProductRepository
	carts       ports.CartRepository
	orders      ports.OrderRepository
	userCoupons ports.UserCouponRepository
	guard       *guard.Guard
	clock       ports.Clock
	ids         ports.IDGenerator
	permissions ports.PurchasePermissions
	adding      *combine.Combiner[string, AddToCartCommand, CartItemView] // by user id
}

// NewService wires the cart and order use cases to their ports.
func NewService(d Deps) *Service {
	s := &Service{tx: d.Tx, products: d.Products, carts: d.Carts, orders: d.Orders, userCoupons: d.UserCoupons,
		guard: d.Guard, clock: d.Clock, ids: d.IDs, permissions: d.Permissions}
	s.adding = combine.New(combine.Config[string, AddToCartCommand]{MaxBatch: maxAddBatch, Timeout: d.AddTimeout}, s.addBatch)
	return s
}

// ItemView is one order line: the product's name and unit price when the order was placed.
type ItemView struct {
	ProductID string
	Name      string
	Quantity  int
	UnitPrice int64
	Subtotal  int64
}

// View is an order as clients see it; CouponID and PaidAt are null when there is none (yet).
type View struct {
	OrderID        string
	UserID         string
	Items          []ItemView
	SubtotalAmount int64
	DiscountAmount int64
	TotalAmount    int64
	CouponID       *string
	Status         string
	CreatedAt      time.Time
	PaidAt         *time.Time
}

func viewOf(o *order.Order) View {
	v := View{OrderID: o.ID(), UserID: o.UserID(), SubtotalAmount: o.Subtotal(), DiscountAmount: o.Discount(),
		TotalAmount: o.Total(), Status: string(o.Status()), CreatedAt: o.CreatedAt(), PaidAt: o.PaidAt()}
	if id := o.CouponID(); id != "" {
		v.CouponID = &id
	}
	items := o.Items()
	v.Items = make([]ItemView, len(items))
	for i, item := range items {
		v.Items[i] = ItemView{ProductID: item.ProductID, Name: item.Name, Quantity: item.Quantity,
			UnitPrice: item.UnitPrice, Subtotal: item.Subtotal}
	}
	return v
}

// PlaceCommand places an order of the user's cart. CouponID, when not nil, is the id of a
// coupon the user holds AVAILABLE and unexpired. IdempotencyKey is optional: with one, a retry
// of a placed order replays its answer instead of answering EMPTY_CART, from the idempotency
// marker committed with the order when the record is lost, so it never places a second order.
type PlaceCommand struct {
	UserID         string
	CouponID       *string
	IdempotencyKey string
}

// Place turns the user's cart into a PENDING order in one transaction under the cart's
// row lock: read the lines with their current prices and stock, check every line's permission
// (counting the units the user's orders hold), then its stock, and the coupon, insert the order
// with its items, empty the cart. Of concurrent orders of one cart one takes its lines and the
// others find it empty. Fails with order.ErrEmptyCart, the purchase permissions' refusal of a
// line, catalog.InsufficientStock naming the product, coupon.ErrInvalid,
// commerce.ErrAmountOverflow, or, with an IdempotencyKey, the guard's errors.
func (s *Service) Place(ctx context.Context, cmd PlaceCommand) (guard.Result[View], error) {
	if err := domain.ValidateUserID("userId", cmd.UserID); err != nil {
		return guard.Result[View]{}, err
	}
	if cmd.CouponID != nil {
		if err := domain.ValidateUUID("couponId", *cmd.CouponID); err != nil {
			return guard.Result[View]{}, err
		}
	}
	if cmd.IdempotencyKey == "" {
		view, err := s.place(ctx, cmd)
		return guard.Result[View]{Value: view, Outcome: guard.OutcomeCreated}, err
	}
	// The coupon is the one id an order acts on besides the cart, which is the user's own.
	var ids []string
	if cmd.CouponID != nil {
		ids = []string{*cmd.CouponID}
	}
	return guard.OnceMarked(ctx, s.guard, guard.Request{
		UserID:         cmd.UserID,
		IdempotencyKey: cmd.IdempotencyKey,
		Fingerprint:    guard.Fingerprint("order.place", ids, nil),
		Outcome:        guard.OutcomeCreated,
	}, func(ctx context.Context) (View, error) { return s.place(ctx, cmd) })
}

// place is Place's transaction.
func (s *Service) place(ctx context.Context, cmd PlaceCommand) (View, error) {
	var placed *order.Order
	err := s.tx.InTx(ctx, func(ctx context.Context) error {
		cart, found, err := s.carts.GetForUpdate(ctx, cmd.UserID)
		if err != nil {
			return fmt.Errorf("lock cart: %w", err)
		}
		if !found {
			return order.ErrEmptyCart
		}
		lines, err := s.carts.Lines(ctx, cmd.UserID)
		if err != nil {
			return fmt.Errorf("read cart: %w", err)
		}
		for _, l := range lines {
			if err := s.checkPurchase(ctx, cmd.UserID, l.ProductID(), l.Quantity()); err != nil {
				return err
			}
		}
		now := s.clock.Now()
		var discount order.Discount
		if cmd.CouponID != nil && len(lines) > 0 {
			if discount, err = s.discount(ctx, cmd.UserID, *cmd.CouponID, now); err != nil {
				return err
			}
		}
		if placed, err = order.Place(s.ids.NewID(), cmd.UserID, lines, discount, now); err != nil {
			return err
		}
		if err := s.orders.Create(ctx, placed); err != nil {
			return fmt.Errorf("create order: %w", err)
		}
		if err := s.carts.Clear(ctx, cart.ID()); err != nil {
			return fmt.Errorf("empty cart: %w", err)
		}
		return nil
	})
	if err != nil {
		return View{}, err
	}
	return viewOf(placed), nil
}

// checkPurchase refuses quantity units of productID in userID's cart, or in the order being
// placed from it, when the purchase permissions restrict the product and the user may buy none
// of it, or fewer than quantity beside the units the user's orders hold already. Callers hold
// the cart's lock, under which every order is placed, so no placement of the user's slips in
// between the count and their write. Only a restricted product costs a read of the orders.
func (s *Service) checkPurchase(ctx context.Context, userID, productID string, quantity int) error {
	if s.permissions == nil {
		return nil
	}
	limit, limited, err := s.permissions.PurchaseLimit(ctx, userID, productID)
	if err != nil || !limited {
		return err
	}
	ordered, err := s.orders.UnitsOrdered(ctx, userID, productID)
	if err != nil {
		return fmt.Errorf("count the units ordered: %w", err)
	}
	return order.CheckPurchaseLimit(limit, ordered, quantity)
}

// discount is the coupon's terms when the user holds it AVAILABLE and unexpired at now, or
// coupon.ErrInvalid. The order only reads the user coupon: payment redeems it under its lock.
func (s *Service) discount(ctx context.Context, userID, couponID string, now time.Time) (order.Discount, error) {
	held, err := s.userCoupons.Get(ctx, userID, couponID)
	if err != nil {
		return order.Discount{}, err
	}
	if err := held.CheckUsable(now); err != nil {
		return order.Discount{}, err
	}
	return order.Discount{CouponID: couponID, Rate: held.DiscountRate}, nil
}

// GetQuery reads one order as a user; an admin may read any order.
type GetQuery struct {
	OrderID string
	UserID  string
	Admin   bool
}

// Get returns the order when the user placed it or is an admin. Another user's order answers
// order.ErrNotFound, as an unknown one does, so that order ids cannot be probed.
func (s *Service) Get(ctx context.Context, q GetQuery) (View, error) {
	if err := domain.ValidateUUID("orderId", q.OrderID); err != nil {
		return View{}, err
	}
	o, err := s.orders.Get(ctx, q.OrderID)
	if err != nil {
		return View{}, err
	}
	if o.UserID() != q.UserID && !q.Admin {
		return View{}, order.ErrNotFound
	}
	return viewOf(o), nil
}

// CancelCommand cancels an order as a user; an admin may cancel any order.
type CancelCommand struct {
	OrderID string
	UserID  string
	Admin   bool
}

// Cancel turns a PENDING order CANCELLED and returns it. Cancelling a CANCELLED order
// again answers it unchanged. The order's row is locked for the whole decision, as a payment
// locks it, so a cancel racing a payment of the order ends in exactly one of the two, and the
// write is conditional on PENDING besides. The coupon an order names is left as it is: a PENDING
// order reserves nothing. Fails with order.ErrNotFound (also for another user's order, as Get
// does) or order.ErrNotCancellable (the order is paid).
func (s *Service) Cancel(ctx context.Context, cmd CancelCommand) (View, error) {
	if err := domain.ValidateUUID("orderId", cmd.OrderID); err != nil {
		return View{}, err
	}
	var cancelled *order.Order
	err := s.tx.InTx(ctx, func(ctx context.Context) error {
		o, err := s.orders.GetForUpdate(ctx, cmd.OrderID)
		if err != nil {
			return err
		}
		if o.UserID() != cmd.UserID && !cmd.Admin {
			return order.ErrNotFound
		}
		changed, err := o.Cancel()
		if err != nil {
			return err
		}
		if changed {
			if err := s.orders.MarkCancelled(ctx, o.ID()); err != nil {
				return fmt.Errorf("mark order cancelled: %w", err)
			}
		}
		cancelled = o
		return nil
	})
	if err != nil {
		return View{}, err
	}
	return viewOf(cancelled), nil
}
