package order_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce"
	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/order"
)

var now = time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)

func line(productID string, quantity int, price, stock int64) order.CartLine {
	return order.CartLine{CartItem: order.RebuildCartItem("i-"+productID, "c1", productID, quantity, now),
		Name: "n-" + productID, UnitPrice: price, Stock: stock}
}

func TestPlace_ComputesAmounts(t *testing.T) {
	o, err := order.Place("o1", "u1", []order.CartLine{line("p1", 5, 10000, 50), line("p2", 10, 20000, 10)},
		order.Discount{CouponID: "c1", Rate: 10}, now)
	if err != nil {
		t.Fatal(err)
	}
	if o.Subtotal() != 250000 || o.Discount() != 25000 || o.Total() != 225000 || o.Status() != order.StatusPending ||
		o.CouponID() != "c1" || o.PaidAt() != nil || len(o.Items()) != 2 || o.Items()[1].Subtotal != 200000 {
		t.Fatalf("order %+v", o)
	}
}

func TestPlace_Refusals(t *testing.T) {
	cases := []struct {
		name  string
		lines []order.CartLine
		want  error
	}{
		{"empty cart", nil, order.ErrEmptyCart},
		{"stock short on the second line", []order.CartLine{line("p1", 1, 1, 1), line("p2", 3, 1, 2)}, catalog.ErrInsufficientStock},
		{"line overflows", []order.CartLine{line("p1", 2, commerce.MaxAmount, 10)}, commerce.ErrAmountOverflow},
		{"sum overflows", []order.CartLine{line("p1", 1, commerce.MaxAmount, 10), line("p2", 1, 1, 10)}, commerce.ErrAmountOverflow},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := order.Place("o1", "u1", tc.lines, order.Discount{}, now)
			if !errors.Is(err, tc.want) || o != nil {
				t.Fatalf("got %v, %v; want %v", o, err, tc.want)
			}
		})
	}
	_, err := order.Place("o1", "u1", []order.CartLine{line("p1", 1, 1, 1), line("p2", 3, 1, 2)}, order.Discount{}, now)
	if de, _ := domain.AsError(err); de == nil || de.Details["productId"] != "p2" {
		t.Fatalf("INSUFFICIENT_STOCK names %v, want p2", err)
	}
}

func TestNewCart_RefusesABadUserID(t *testing.T) {
	for _, userID := range []string{"", "a\x00b", strings.Repeat("u", 200)} {
		if _, err := order.NewCart("c1", userID, now); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("user %q: %v", userID, err)
		}
	}
	cart, err := order.NewCart("c1", "u1", now)
	if err != nil || cart.ID() != "c1" || cart.UserID() != "u1" || !cart.CreatedAt().Equal(now) {
		t.Fatalf("cart %+v, %v", cart, err)
	}
}

func TestCart_Add(t *testing.T) {
	cart := order.RebuildCart("c1", "u1", now)
	p, _ := catalog.NewProduct("p1", "pen", 100, now)
	stock := catalog.RebuildStock("p1", 10, 0)
	existing := line("p1", 4, 100, 10)

	item, err := cart.Add(nil, "new", p, stock, 3, now)
	if err != nil || item.ID() != "new" || item.Quantity() != 3 || item.CartID() != "c1" || item.ProductID() != "p1" ||
		!item.AddedAt().Equal(now) {
		t.Fatalf("new line: %+v, %v", item, err)
	}
	item, err = cart.Add([]order.CartLine{existing}, "new", p, stock, 6, now.Add(time.Hour))
	if err != nil || item.ID() != existing.ID() || item.Quantity() != 10 || !item.AddedAt().Equal(existing.AddedAt()) {
		t.Fatalf("raised line: %+v, %v", item, err)
	}
	if _, err := cart.Add([]order.CartLine{existing}, "new", p, stock, 7, now); !errors.Is(err, catalog.ErrInsufficientStock) {
		t.Fatalf("4 + 7 > 10: %v", err)
	}
	for _, q := range []int{0, -1, order.MaxLineQuantity + 1} {
		if _, err := cart.Add(nil, "new", p, stock, q, now); !errors.Is(err, domain.ErrValidation) {
			t.Fatalf("quantity %d: %v", q, err)
		}
	}
	full := make([]order.CartLine, order.MaxCartLines)
	for i := range full {
		full[i] = line(string(rune('A'+i%26))+string(rune('a'+i/26)), 1, 1, 10)
	}
	if _, err := cart.Add(full, "new", p, stock, 1, now); !errors.Is(err, domain.ErrValidation) {
		t.Fatalf("a cart past %d products: %v", order.MaxCartLines, err)
	}
	dear, _ := catalog.NewProduct("p2", "gold", commerce.MaxAmount, now)
	if _, err := cart.Add([]order.CartLine{existing}, "new", dear, stock, 1, now); !errors.Is(err, commerce.ErrAmountOverflow) {
		t.Fatalf("total past MaxAmount: %v", err)
	}
}

func TestCheckPurchaseLimit_CountsTheUnitsOrderedAlready(t *testing.T) {
	for _, tc := range []struct {
		limit, ordered, quantity int
		ok                       bool
		says                     string
	}{
		{limit: 1, ordered: 0, quantity: 1, ok: true},
		{limit: 1, ordered: 0, quantity: 2, says: "at most 1 of this product"},
		{limit: 1, ordered: 1, quantity: 1, says: "have ordered 1 already"},
		{limit: 3, ordered: 1, quantity: 2, ok: true},
		{limit: 3, ordered: 2, quantity: 2, says: "have ordered 2 already"},
	} {
		err := order.CheckPurchaseLimit(tc.limit, tc.ordered, tc.quantity)
		if tc.ok != (err == nil) {
			t.Errorf("limit %d, ordered %d, quantity %d: %v", tc.limit, tc.ordered, tc.quantity, err)
			continue
		}
		if de, _ := domain.AsError(err); !tc.ok && (!errors.Is(err, domain.ErrValidation) ||
			de.Details["field"] != "quantity" || !strings.Contains(de.Message, tc.says)) {
			t.Errorf("limit %d, ordered %d, quantity %d: %v, want a quantity error saying %q", tc.limit, tc.ordered, tc.quantity, err, tc.says)
		}
	}
}

func TestCancel_OnlyAPendingOrderAndAgainWithoutChange(t *testing.T) {
	placed := func() *order.Order {
		o, err := order.Place("o1", "u1", []order.CartLine{line("p1", 1, 10, 5)}, order.Discount{}, now)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := placed()
	if changed, err := o.Cancel(); !changed || err != nil || o.Status() != order.StatusCancelled {
		t.Fatalf("first cancel: changed %v, %v, status %s", changed, err, o.Status())
	}
	if changed, err := o.Cancel(); changed || err != nil || o.Status() != order.StatusCancelled {
		t.Fatalf("second cancel: changed %v, %v, status %s", changed, err, o.Status())
	}
	if err := o.Pay(now); !errors.Is(err, order.ErrNotPayable) || o.PaidAt() != nil {
		t.Fatalf("paying a cancelled order: %v, paidAt %v", err, o.PaidAt())
	}

	paid := placed()
	if err := paid.Pay(now); err != nil {
		t.Fatal(err)
	}
	if changed, err := paid.Cancel(); changed || !errors.Is(err, order.ErrNotCancellable) || paid.Status() != order.StatusCompleted {
		t.Fatalf("cancelling a paid order: changed %v, %v, status %s", changed, err, paid.Status())
	}
}
