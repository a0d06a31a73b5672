package order

import (
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce"
	"github.com/rushgate/rushgate/domain/commerce/catalog"
)

var (
	ErrEmptyCart = domain.NewError(domain.KindInvalid, "EMPTY_CART", "the cart is empty")
	ErrNotFound  = domain.NewError(domain.KindNotFound, "ORDER_NOT_FOUND", "order not found")
	// ErrNotPayable refuses paying an order that is not PENDING (already paid, or cancelled).
	ErrNotPayable = domain.NewError(domain.KindInvalid, "ORDER_NOT_PAYABLE", "the order is not awaiting payment")
	// ErrNotCancellable refuses cancelling an order that is neither PENDING nor CANCELLED.
	ErrNotCancellable = domain.NewError(domain.KindInvalid, "ORDER_NOT_CANCELLABLE", "only an order awaiting payment can be cancelled")
)

// Status is where an order is in its life.
type Status string

// Statuses of an order: placed and awaiting payment, then paid or cancelled; both are final.
const (
	StatusPending   Status = "PENDING"
	StatusCompleted Status = "COMPLETED"
	StatusCancelled Status = "CANCELLED"
)

// Item is one line of an order: the product's name and unit price as they were when the order
// was placed.
type Item struct {
	ProductID string
	Name      string
	Quantity  int
	UnitPrice int64
	Subtotal  int64
}

// Discount is the coupon an order applies, if any: the coupon's id and its rate in percent
// (1..100). The zero value is no coupon.
type Discount struct {
	CouponID string
	Rate     int
}

// Order is a user's purchase of a cart's lines, with amounts fixed when it is placed:
// total = subtotal − discount, discount = Rate% of subtotal rounded down.
type Order struct {
	id        string
	userID    string
	couponID  string
	items     []Item
	subtotal  int64
	discount  int64
	total     int64
	status    Status
	createdAt time.Time
	paidAt    *time.Time
}

// Place turns a cart's lines into a PENDING order: ErrEmptyCart without lines,
// catalog.InsufficientStock naming the first line (in lines' order) whose stock does not cover
// it, commerce.ErrAmountOverflow when an amount leaves the range rushgate holds.
func Place(id, userID string, lines []CartLine, discount Discount, now time.Time) (*Order, error) {
	if len(lines) == 0 {
		return nil, ErrEmptyCart
	}
	o := &Order{id: id, userID: userID, couponID: discount.CouponID, status: StatusPending, createdAt: now,
		items: make([]Item, len(lines))}
	for i, l := range lines {
		if !l.StockAvailable() {
			return nil, catalog.InsufficientStock(l.productID)
		}
		subtotal, err := l.Subtotal()
		if err != nil {
			return nil, err
		}
		if o.subtotal, err = commerce.Add(o.subtotal, subtotal); err != nil {
			return nil, err
		}
		o.items[i] = Item{ProductID: l.productID, Name: l.Name, Quantity: l.quantity, UnitPrice: l.UnitPrice, Subtotal: subtotal}
	}
	var err error
	if o.discount, err = commerce.Percent(o.subtotal, discount.Rate); err != nil {
		return nil, err
	}
	o.total = o.subtotal - o.discount // discount ≤ subtotal: never negative
	return o, nil
}

// Rebuild restores an order from storage without re-validating; adapters only.
func Rebuild(id, userID, couponID string, items []Item, subtotal, discount, total int64, status Status,
	createdAt time.Time, paidAt *time.Time) *Order {
	return &Order{id: id, userID: userID, couponID: couponID, items: items, subtotal: subtotal, discount: discount,
		total: total, status: status, createdAt: createdAt, paidAt: paidAt}
}

func (o *Order) ID() string     { return o.id }
func (o *Order) UserID() string { return o.userID }

// CouponID is the applied coupon's id, "" when none.
func (o *Order) CouponID() string { return o.couponID }

// Items returns a copy of the order's lines.
func (o *Order) Items() []Item        { return append([]Item(nil), o.items...) }
func (o *Order) Subtotal() int64      { return o.subtotal }
func (o *Order) Discount() int64      { return o.discount }
func (o *Order) Total() int64         { return o.total }
func (o *Order) Status() Status       { return o.status }
func (o *Order) CreatedAt() time.Time { return o.createdAt }

// PaidAt is when the order was paid, nil while it is PENDING.
func (o *Order) PaidAt() *time.Time { return o.paidAt }

// Pay marks a PENDING order COMPLETED at now, or returns ErrNotPayable and leaves it unchanged.
func (o *Order) Pay(now time.Time) error {
	if o.status != StatusPending {
		return ErrNotPayable
	}
	o.status, o.paidAt = StatusCompleted, &now
	return nil
}

// Cancel marks a PENDING order CANCELLED and reports that it changed it. Cancelling a CANCELLED
// order again changes nothing and succeeds, so a repeated cancel answers as the first did; any
// other order is ErrNotCancellable. A PENDING order reserves nothing (its coupon stays with the
// user until a payment uses it), so there is nothing to give back.
func (o *Order) Cancel() (changed bool, err error) {
	switch o.status {
	case StatusPending:
		o.status = StatusCancelled
		return true, nil
	case StatusCancelled:
		return false, nil
	default:
		return false, ErrNotCancellable
	}
}

// Sales is one product's units sold and revenue over a period, for the top products.
type Sales struct {
	ProductID string
	Name      string
	Units     int64
	Revenue   int64
}
