package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/application/ranking"
)

// The top products read: --users GET /api/products/top against --order-items order lines
// written straight to the database, one line per order: half COMPLETED within the last 3 days,
// a quarter COMPLETED 4 to 10 days ago, a quarter PENDING. Judged on requests/s against the same
// rollup read straight on the database at the same concurrency, and p99; every answer must be the
// ranking the generated data implies. The lines are written straight to the tables, then rolled
// up into product_sales_hourly as a payment would have.

const (
	topProductsCount = 40
	topPrice         = 100
)

// newTopProducts is --users reads over --order-items lines.
func newTopProducts(cfg config) (scenario, error) {
	if cfg.orderItems < 100 {
		return nil, errors.New("top-products: --order-items must be at least 100")
	}
	return &topProducts{reads: cfg.users, items: cfg.orderItems}, nil
}

// topProducts is a herd of readers of one ranking.
type topProducts struct {
	reads, items int

	// Set by prepare.
	bearer string
	want   []rankedProduct
}

// rankedProduct is one line of the ranking as the API answers it.
type rankedProduct struct {
	Rank       int    `json:"rank"`
	ProductID  string `json:"productId"`
	Name       string `json:"name"`
	SalesCount int64  `json:"salesCount"`
	Revenue    int64  `json:"revenue"`
}

var _ scenario = (*topProducts)(nil)

func (s *topProducts) shape() string {
	return fmt.Sprintf("%d reads of the top 5 over %d order items", s.reads, s.items)
}

func (s *topProducts) targets(gormdb.Dialect) []target {
	return []target{
		{measure: measureGoodputRatio},
		{measure: measureP99},
	}
}

// prepare writes the products, orders and lines in multi-row INSERTs and computes the ranking
// they imply: product p is bought by a share of the orders growing with p, so the top is clear.
func (s *topProducts) prepare(ctx context.Context, e *env) error {
	started := time.Now()
	now := time.Now().UTC()
	products := make([]string, topProductsCount)
	var productRows, stockRows [][]any
	for p := range products {
		products[p] = uuid.NewString()
		productRows = append(productRows, []any{products[p], fmt.Sprintf("top %s %d", e.runID, p), topPrice, now})
		stockRows = append(stockRows, []any{products[p], 0, 0})
	}
	if err := bulkInsert(ctx, e.db, "products (id, name, price, created_at)", productRows); err != nil {
		return err
	}
	if err := bulkInsert(ctx, e.db, "stock (product_id, quantity, version)", stockRows); err != nil {
		return err
	}
	// Order i buys product pick(i), weighted so product p is chosen about (p+1) times as often
	// as product 0.
	weights := topProductsCount * (topProductsCount + 1) / 2
	pick := func(i int) int {
		r := (i * 7919) % weights
		for p := range topProductsCount {
			if r -= p + 1; r < 0 {
				return p
			}
		}
		return topProductsCount - 1
	}
	units := make([]int64, topProductsCount)
	const chunk = 20000
	for start := 0; start < s.items; start += chunk {
		var orders, items [][]any
		for i := start; i < min(start+chunk, s.items); i++ {
			id, p, quantity := uuid.NewString(), pick(i), int64(1+i%3)
			status, paidAt := "COMPLETED", any(now.Add(-time.Duration(i%4000)*time.Minute)) // within 67 hours
			switch i % 4 {
			case 2:
				paidAt = now.Add(-96*time.Hour - time.Duration(i%8000)*time.Minute) // 4 to 10 days ago
			case 3:
				status, paidAt = "PENDING", nil
			default:
				units[p] += quantity
			}
			amount := quantity * topPrice
			orders = append(orders, []any{id, "top-" + e.runID, amount, 0, amount, status, now, paidAt})
			items = append(items, []any{id, 0, products[p], "top", quantity, topPrice, amount})
		}
		if err := bulkInsert(ctx, e.db, "orders (id, user_id, subtotal_amount, discount_amount, total_amount, status, created_at, paid_at)", orders); err != nil {
			return err
		}
		if err := bulkInsert(ctx, e.db, "order_items (order_id, line, product_id, name, quantity, unit_price, subtotal)", items); err != nil {
			return err
		}
		progress(e.stderr, "run %s: %d of %d order items written\n", e.runID, min(start+chunk, s.items), s.items)
	}
	// Writing orders straight to the tables bypasses the payment that keeps the rollup, so the
	// run's COMPLETED lines are rolled up as migration 00008 backfills them.
	rollUp := gormdb.Bind(e.db.Dialect(), "INSERT INTO product_sales_hourly (product_id, hour_start, units, revenue) "+
		"SELECT i.product_id, "+hourStart(e.db.Dialect())+", SUM(i.quantity), SUM(i.subtotal) "+
		"FROM orders o JOIN order_items i ON i.order_id = o.id "+
		"WHERE o.user_id = ? AND o.status = 'COMPLETED' GROUP BY 1, 2")
	if _, err := e.db.SQL().ExecContext(ctx, rollUp, "top-"+e.runID); err != nil {
		return fmt.Errorf("roll up sales: %w", err)
	}
	for p := range products {
		s.want = append(s.want, rankedProduct{ProductID: products[p], Name: fmt.Sprintf("top %s %d", e.runID, p),
			SalesCount: units[p], Revenue: units[p] * topPrice})
	}
	slices.SortFunc(s.want, func(a, b rankedProduct) int {
		return cmp.Or(cmp.Compare(b.SalesCount, a.SalesCount), cmp.Compare(a.ProductID, b.ProductID))
	})
	s.want = s.want[:5]
	for i := range s.want {
		s.want[i].Rank = i + 1
	}
	if _, err := e.db.SQL().ExecContext(ctx, analyzeStatement(e.db.Dialect())); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	progress(e.stderr, "run %s: %d order items prepared in %v\n", e.runID, s.items, time.Since(started).Round(time.Millisecond))
	var err error
	s.bearer, err = e.userToken("load-" + e.runID + "-reader")
	return err
}

// hourStart is the UTC hour of an order's payment time, o.paid_at, as product_sales_hourly keys it.
func hourStart(d gormdb.Dialect) string {
	if d == gormdb.Postgres {
		return "date_trunc('hour', o.paid_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"
	}
	return "CAST(DATE_FORMAT(o.paid_at, '%Y-%m-%d %H:00:00') AS DATETIME(6))"
}

// analyzeStatement refreshes the planner's statistics after the bulk load.
func analyzeStatement(d gormdb.Dialect) string {
	if d == gormdb.Postgres {
		return "ANALYZE orders, order_items, product_sales_hourly"
	}
	return "ANALYZE TABLE orders, order_items, product_sales_hourly"
}

// run reads the ranking; a read succeeds with 200 and the ranking the data implies.
func (s *topProducts) run(e *env) work {
	headers := map[string]string{"Authorization": "Bearer " + s.bearer}
	return work{n: s.reads, do: func(ctx context.Context, i int) attempt {
		a, raw := e.api.send(ctx, i, http.MethodGet, "/api/products/top", headers, nil)
		var got struct {
			Period   string          `json:"period"`
			Products []rankedProduct `json:"products"`
		}
		a.ok = a.status == http.StatusOK && json.Unmarshal(raw, &got) == nil && got.Period == "3days" && slices.Equal(got.Products, s.want)
		if a.status == http.StatusOK && !a.ok {
			a.code = "WRONG_RANKING"
			a.detail = snippet(raw)
		}
		return a
	}}
}

// invariant: every read answered the ranking the data implies (an empty list is a timeout the
// server swallowed, and counts as wrong).
func (s *topProducts) invariant(_ context.Context, _ *env, attempts []attempt) (invariantResult, error) {
	right, wrong := 0, 0
	var first string
	for _, a := range attempts {
		switch {
		case a.ok:
			right++
		case a.code == "WRONG_RANKING":
			wrong++
			if first == "" {
				first = a.detail
			}
		}
	}
	var violations []string
	if wrong > 0 {
		violations = append(violations, fmt.Sprintf("%d reads answered another ranking, e.g. %s", wrong, first))
	}
	return invariantResult{
		rows: []invariantRow{
			{label: "reads answering the expected top 5", value: right},
			{label: "reads answering another (or empty) ranking", value: wrong},
		},
		violations: violations,
	}, nil
}

// ceilingReadTimeout bounds one bare read: at the run's concurrency they queue behind each
// other far past a request's timeout, and the ceiling is a rate, not a latency bound.
const ceilingReadTimeout = time.Minute

// ceiling is the bare read rushgate runs — the orders repository's TopSelling, straight on the
// database, one per read, two per worker at most: the whole hours of the 3 days from
// product_sales_hourly plus the part of an hour before them from the orders, ranked, with names.
func (s *topProducts) ceiling(_ context.Context, e *env) (work, error) {
	orders := gormdb.NewOrderRepository(e.db)
	return work{n: min(s.reads, 2*e.concurrency), do: func(ctx context.Context, i int) attempt {
		ctx, cancel := context.WithTimeout(ctx, max(e.timeout, ceilingReadTimeout))
		defer cancel()
		start := time.Now()
		top, err := orders.TopSelling(ctx, time.Now().Add(-ranking.DefaultPeriod), ranking.DefaultLimit)
		return attempt{latency: time.Since(start), ok: err == nil && len(top) == ranking.DefaultLimit, err: err}
	}}, nil
}
