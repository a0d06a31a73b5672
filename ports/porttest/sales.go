package porttest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/ports"
)

// The cases below pay orders in the far future, where no other case of the suite sells, so the
// ranking from a time holds their sales alone (and, for the concurrent case, sales that dominate).

// sale is one order of a ranking case: its lines by product index and when it is paid (never,
// when paidAt is zero).
type sale struct {
	paidAt time.Time
	lines  map[int]int
}

// placeSale builds the PENDING order of s over products.
func placeSale(t *testing.T, products []*catalog.Product, s sale) *order.Order {
	t.Helper()
	var placed []order.CartLine
	for i, quantity := range s.lines {
		p := products[i]
		placed = append(placed, orderLine(p, quantity, int64(quantity)))
	}
	o, err := order.Place(randomID(), newUserID(), placed, order.Discount{}, now())
	must(t, err, "place order")
	return o
}

// liveTopSelling is TopSelling's definition computed from the sales themselves: units of the
// orders paid at or after since, most first, ties by product id, the first limit.
func liveTopSelling(products []*catalog.Product, sales []sale, since time.Time, limit int) []order.Sales {
	byProduct := map[int]*order.Sales{}
	for _, s := range sales {
		if s.paidAt.IsZero() || s.paidAt.Before(since) {
			continue
		}
		for i, quantity := range s.lines {
			p := products[i]
			total := byProduct[i]
			if total == nil {
				total = &order.Sales{ProductID: p.ID(), Name: p.Name()}
				byProduct[i] = total
			}
			total.Units += int64(quantity)
			total.Revenue += int64(quantity) * p.Price()
		}
	}
	top := []order.Sales{}
	for _, s := range byProduct {
		top = append(top, *s)
	}
	slices.SortFunc(top, func(a, b order.Sales) int {
		return cmp.Or(cmp.Compare(b.Units, a.Units), cmp.Compare(a.ProductID, b.ProductID))
	})
	return top[:min(limit, len(top))]
}

// expectTopSelling checks TopSelling(since, limit) against want.
func expectTopSelling(t *testing.T, s ports.Stores, since time.Time, limit int, want []order.Sales) {
	t.Helper()
	got, err := s.Orders.TopSelling(context.Background(), since, limit)
	must(t, err, "top selling")
	if !slices.Equal(got, want) {
		t.Errorf("top %d since %s:\n got %+v\nwant %+v", limit, since.Format(time.RFC3339Nano), got, want)
	}
}

// testTopSellingAroundHours pays orders just before, at and just after since, within the part
// of an hour before a whole one, at whole hours and later, one created already COMPLETED and one
// left PENDING; from every one of those times the ranking is exactly the live aggregate.
func testTopSellingAroundHours(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	products := make([]*catalog.Product, 5)
	for i := range products {
		products[i] = createProduct(t, e.impl, int64(10*(i+1)), 0)
	}
	hour := time.Date(2100, 3, 4, 5, 0, 0, 0, time.UTC)
	since := hour.Add(20 * time.Minute)
	micro := time.Microsecond
	sales := []sale{
		{hour.Add(-micro), map[int]int{0: 9}},
		{since.Add(-micro), map[int]int{1: 8, 2: 1}},
		{since, map[int]int{2: 3}},
		{since.Add(micro), map[int]int{3: 2, 0: 1}},
		{hour.Add(time.Hour - micro), map[int]int{4: 2}},
		{hour.Add(time.Hour), map[int]int{1: 1, 3: 1}},
		{hour.Add(time.Hour + micro), map[int]int{4: 1}},
		{hour.Add(3*time.Hour + 30*time.Minute), map[int]int{0: 2, 2: 1}},
		{time.Time{}, map[int]int{4: 50}},
	}
	for _, s := range sales {
		o := placeSale(t, products, s)
		must(t, e.impl.Orders.Create(ctx, o), "create order")
		if !s.paidAt.IsZero() {
			must(t, e.impl.Orders.MarkPaid(ctx, o.ID(), s.paidAt), "mark paid")
		}
	}
	// An order stored COMPLETED counts as one paid after its creation.
	completed := sale{hour.Add(2*time.Hour + time.Minute), map[int]int{3: 1, 1: 2}}
	o := placeSale(t, products, completed)
	must(t, o.Pay(completed.paidAt), "pay")
	must(t, e.impl.Orders.Create(ctx, o), "create completed order")
	sales = append(sales, completed)

	for _, from := range []time.Time{hour.Add(-time.Hour), hour.Add(-micro), hour, since.Add(-micro), since, since.Add(micro),
		since.Add(micro / 2), hour.Add(time.Hour - micro), hour.Add(time.Hour), hour.Add(time.Hour + micro), hour.Add(5 * time.Hour)} {
		for _, limit := range []int{1, 3, 10} {
			t.Run(fmt.Sprintf("%s/%d", from.Format(time.RFC3339Nano), limit), func(t *testing.T) {
				expectTopSelling(t, e.impl, from, limit, liveTopSelling(products, sales, from, limit))
			})
		}
	}
}

// testConcurrentPaymentsRollUpEveryLine pays 20 orders of three products (in different line
// orders) in one hour at once; the ranking counts every unit of every one. Their units dwarf
// every other case's, so they are the top three whatever else the suite sold later.
func testConcurrentPaymentsRollUpEveryLine(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	products := make([]*catalog.Product, 3)
	for i := range products {
		products[i] = createProduct(t, e.impl, int64(i+1), 0)
	}
	hour := time.Date(2090, 6, 7, 8, 0, 0, 0, time.UTC)
	sales := make([]sale, 20)
	orders := make([]*order.Order, len(sales))
	for n := range sales {
		sales[n] = sale{hour.Add(time.Duration(n) * time.Minute), map[int]int{0: 1000 + n, 1: 2000 + n, 2: 3000 + n}}
		orders[n] = placeSale(t, products, sales[n])
		must(t, e.impl.Orders.Create(ctx, orders[n]), "create order")
	}
	errs := startTogether(len(orders), func(n int) error {
		return e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
			return e.impl.Orders.MarkPaid(ctx, orders[n].ID(), sales[n].paidAt)
		})
	})
	for _, err := range errs {
		must(t, err, "mark paid")
	}
	expectTopSelling(t, e.impl, hour, 3, liveTopSelling(products, sales, hour, 3))
	expectTopSelling(t, e.impl, hour.Add(10*time.Minute), 3, liveTopSelling(products, sales, hour.Add(10*time.Minute), 3))
}
