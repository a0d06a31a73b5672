package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/domain/commerce/catalog"
	domainorder "github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/domain/outbox"
)

// placeOrder puts quantity units of product in user's cart and places the order, returning its id.
func (s *server) placeOrder(user, productID string, quantity int, body string) string {
	s.t.Helper()
	if res := s.addToCart(user, productID, quantity); res.status != http.StatusCreated {
		s.t.Fatalf("add to cart: %d %s", res.status, res.raw)
	}
	placed := s.do("POST", "/api/orders", s.token(user), body)
	if placed.status != http.StatusCreated {
		s.t.Fatalf("place order: %d %s", placed.status, placed.raw)
	}
	return placed.str("orderId")
}

func (s *server) pay(user, orderID, key string) response {
	return s.do("POST", "/api/orders/"+orderID+"/payment", s.token(user), "", "Idempotency-Key", s.run+key)
}

// stockOf is a product's stock on hand and the units its history took out, read through the
// server's stores.
func (s *server) stockOf(productID string) (quantity, out int64) {
	s.t.Helper()
	ctx := context.Background()
	_, st, err := s.stores.Products.Get(ctx, productID)
	if err != nil {
		s.t.Fatal(err)
	}
	movements, err := s.stores.Stock.Movements(ctx, productID)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, m := range movements {
		if m.Type != catalog.MovementOut || m.Before-m.After < 1 || m.RefType != catalog.RefOrder {
			s.t.Fatalf("unexpected movement %+v", m)
		}
		out += m.Before - m.After
	}
	return st.Quantity(), out
}

// outboxOrders returns the order id of every outbox message, with how many messages name it.
func (s *server) outboxOrders() map[string]int {
	s.t.Helper()
	byOrder := map[string]int{}
	cursor := ""
	for {
		page, next, err := s.stores.Outbox.List(context.Background(), "", cursor, 500)
		if err != nil {
			s.t.Fatal(err)
		}
		for _, m := range page {
			var body struct {
				MessageID string `json:"messageId"`
				OrderID   string `json:"orderId"`
			}
			if err := json.Unmarshal(m.Payload, &body); err != nil || body.MessageID != m.ID {
				s.t.Fatalf("message %s: payload %s (%v) lacks its own id", m.ID, m.Payload, err)
			}
			byOrder[body.OrderID]++
		}
		if next == "" {
			return byOrder
		}
		cursor = next
	}
}

// TestPayment_EveryStatus walks every answer of the payment on every backend.
func TestPayment_EveryStatus(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b)
			p := s.createProduct("paid thing", 1000, 5)
			s.createUser("payer", 2500)
			orderID := s.placeOrder("payer", p, 2, "")

			assertError(t, s.do("POST", "/api/orders/"+orderID+"/payment", s.token("payer"), ""), http.StatusBadRequest, "IDEMPOTENCY_KEY_REQUIRED")
			assertError(t, s.pay("payer", absentID, "k0"), http.StatusNotFound, "ORDER_NOT_FOUND")
			assertError(t, s.pay("intruder", orderID, "k0"), http.StatusNotFound, "ORDER_NOT_FOUND")
			assertError(t, s.pay("payer", "not-a-uuid", "k0"), http.StatusBadRequest, "VALIDATION_FAILED")
			assertError(t, s.do("POST", "/api/orders/"+orderID+"/payment", s.token("payer"), `{"userId":"other"}`,
				"Idempotency-Key", s.run+"k0"), http.StatusForbidden, "FORBIDDEN")
			assertError(t, s.do("POST", "/api/orders/"+orderID+"/payment", s.token("payer"), `{"amount":1}`,
				"Idempotency-Key", s.run+"k0"), http.StatusBadRequest, "VALIDATION_FAILED")

			paid := s.pay("payer", orderID, "k1")
			if paid.status != http.StatusOK || paid.str("orderId") != orderID || paid.num("paidAmount") != 2000 ||
				paid.num("remainingBalance") != 500 || paid.str("status") != "SUCCESS" || paid.str("paidAt") == "" {
				t.Fatalf("pay: %d %s", paid.status, paid.raw)
			}
			replay := s.pay("payer", orderID, "k1")
			if replay.status != http.StatusOK || replay.header.Get("Idempotent-Replayed") != "true" || string(replay.raw) != string(paid.raw) {
				t.Fatalf("replay: %d %s", replay.status, replay.raw)
			}
			assertError(t, s.pay("payer", orderID, "k2"), http.StatusBadRequest, "ORDER_NOT_PAYABLE")
			got := s.do("GET", "/api/orders/"+orderID, s.token("payer"), "")
			if got.str("status") != "COMPLETED" || got.str("paidAt") != paid.str("paidAt") {
				t.Fatalf("paid order: %s", got.raw)
			}
			s.assertWallet("payer", 500, 2)
			if q, out := s.stockOf(p); q != 3 || out != 2 {
				t.Fatalf("stock %d, history out %d", q, out)
			}

			short := s.placeOrder("payer", p, 1, "")
			s.do("POST", "/admin/users", s.adminToken(), `{"id":"poor","balance":10}`)
			poorOrder := s.placeOrder("poor", p, 1, "")
			res := s.pay("poor", poorOrder, "k3")
			assertError(t, res, http.StatusBadRequest, "INSUFFICIENT_BALANCE")
			if res.num("currentBalance") != 10 || res.num("required") != 1000 {
				t.Fatalf("INSUFFICIENT_BALANCE details: %s", res.raw)
			}
			// The stock is gone when the short order is paid: 3 left, 3 bought by another.
			s.createUser("rich", 1_000_000)
			if r := s.pay("rich", s.placeOrder("rich", p, 3, ""), "k4"); r.status != http.StatusOK {
				t.Fatalf("rich: %d %s", r.status, r.raw)
			}
			s.charge("payer", "1000", "top-up")
			res = s.pay("payer", short, "k5")
			assertError(t, res, http.StatusConflict, "STOCK_DEDUCTION_FAILED")
			if res.str("productId") != p {
				t.Fatalf("STOCK_DEDUCTION_FAILED names %q", res.str("productId"))
			}
			s.assertWallet("payer", 1500, 3)
			s.assertWallet("poor", 10, 1)
			if q, out := s.stockOf(p); q != 0 || out != 5 {
				t.Fatalf("stock %d, history out %d", q, out)
			}
			if orders := s.outboxOrders(); len(orders) != 2 || orders[orderID] != 1 {
				t.Fatalf("outbox: %v", orders)
			}
		})
	}
}

// TestPayment_CouponIsRedeemedOnce: an order's coupon turns USED with the payment; a second
// order placed with the same coupon is refused INVALID_COUPON, with nothing changed.
func TestPayment_CouponIsRedeemedOnce(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b)
			p := s.createProduct("discounted", 1000, 10)
			s.createUser("cpn", 10_000)
			couponID, _ := s.heldCoupon("cpn")
			first := s.placeOrder("cpn", p, 1, `{"couponId":"`+couponID+`"}`)
			second := s.placeOrder("cpn", p, 1, `{"couponId":"`+couponID+`"}`)
			if res := s.pay("cpn", first, "a"); res.status != http.StatusOK || res.num("paidAmount") != 900 {
				t.Fatalf("pay with coupon: %d %s", res.status, res.raw)
			}
			assertError(t, s.pay("cpn", second, "b"), http.StatusBadRequest, "INVALID_COUPON")
			s.assertWallet("cpn", 9100, 2)
			if q, out := s.stockOf(p); q != 9 || out != 1 {
				t.Fatalf("stock %d, out %d", q, out)
			}
		})
	}
}

// TestPayment_StampedeSellsExactlyTheStock: 300 users each pay an order of one unit of a
// product with 100 in stock, all at once. Exactly 100 pay; the others hear 409
// STOCK_DEDUCTION_FAILED and keep their balance; stock ends at 0 and never below, the history
// takes out exactly 100, every paid order has exactly one outbox message; then one order paid
// 20 times at once (20 keys) is charged once.
func TestPayment_StampedeSellsExactlyTheStock(t *testing.T) {
	const users, stock, price, balance = 300, 100, 700, 1000
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b)
			p := s.createProduct("scarce", price, stock)
			orders := make([]string, users)
			// Setting up is not the test: eight at a time, so the pool never runs dry.
			var wg sync.WaitGroup
			slots := make(chan struct{}, 8)
			for i := range users {
				slots <- struct{}{}
				wg.Go(func() {
					defer func() { <-slots }()
					user := fmt.Sprintf("herd%d", i)
					s.createUser(user, balance)
					orders[i] = s.placeOrder(user, p, 1, "")
				})
			}
			wg.Wait()
			counts, answers := fire(users, func(i int) response { return s.pay(fmt.Sprintf("herd%d", i), orders[i], "pay") })
			t.Logf("statuses: %v", counts)
			paid := map[string]bool{}
			for i, a := range answers {
				user := fmt.Sprintf("herd%d", i)
				switch {
				case a.status == http.StatusOK:
					paid[orders[i]] = true
					s.assertWallet(user, balance-price, 2)
				case a.status == http.StatusConflict && a.str("error") == "STOCK_DEDUCTION_FAILED":
					s.assertWallet(user, balance, 1)
				default:
					t.Fatalf("%s: %d %s", user, a.status, a.raw)
				}
			}
			if len(paid) != stock {
				t.Fatalf("%d paid, want %d (statuses %v)", len(paid), stock, counts)
			}
			if q, out := s.stockOf(p); q != 0 || out != stock {
				t.Fatalf("stock %d, history out %d; want 0 and %d", q, out, stock)
			}
			inOutbox := s.outboxOrders()
			for id := range paid {
				if inOutbox[id] != 1 {
					t.Fatalf("paid order %s has %d outbox messages", id, inOutbox[id])
				}
			}
			if len(inOutbox) != len(paid) {
				t.Fatalf("%d orders in the outbox, %d paid", len(inOutbox), len(paid))
			}

			q := s.createProduct("double-clicked", 10, 50)
			s.createUser("clicker", 1000)
			order := s.placeOrder("clicker", q, 2, "")
			counts, _ = fire(20, func(i int) response { return s.pay("clicker", order, fmt.Sprintf("click%d", i)) })
			if counts[http.StatusOK] != 1 || counts[http.StatusBadRequest] != 19 {
				t.Fatalf("20 payments of one order: %v", counts)
			}
			s.assertWallet("clicker", 980, 2)
			if q, out := s.stockOf(q); q != 48 || out != 2 {
				t.Fatalf("stock %d, out %d", q, out)
			}

			// What the ranking reads counts every sold unit once, however the payments raced.
			top, err := s.stores.Orders.TopSelling(context.Background(), time.Now().Add(-time.Hour), 10)
			if err != nil {
				t.Fatal(err)
			}
			want := []domainorder.Sales{{ProductID: p, Name: "scarce", Units: stock, Revenue: stock * price},
				{ProductID: q, Name: "double-clicked", Units: 2, Revenue: 20}}
			if !slices.Equal(top, want) {
				t.Fatalf("top selling %+v, want %+v", top, want)
			}
		})
	}
}

// outboxStatusCounts counts the stored messages of each status.
func (s *server) outboxStatusCounts() map[outbox.Status]int {
	s.t.Helper()
	counts, err := s.stores.Outbox.Count(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	return counts
}

// TestTopProducts_RanksCompletedOrdersOfTheLastThreeDays: units of COMPLETED orders paid in the
// last 3 days rank products (ties by id), with their revenue; a PENDING order counts for
// nothing, and an order paid just before the 3-day boundary counts nothing while one just after
// it counts (those two are paid in the past through the stores' MarkPaid, the write every
// payment makes, so whatever it keeps for the ranking is kept for them too).
func TestTopProducts_RanksCompletedOrdersOfTheLastThreeDays(t *testing.T) {
	type sale struct {
		name         string
		price, units int
		pending      bool
		ageHours     float64 // paid this long ago
	}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b, func(cfg *bootstrap.Config) { cfg.Commerce.TopProductsFreshFor = time.Microsecond })
			empty := s.do("GET", "/api/products/top", s.token("u1"), "")
			if empty.status != http.StatusOK || string(empty.raw) != `{"period":"3days","products":[]}` {
				t.Fatalf("no sales: %d %s", empty.status, empty.raw)
			}
			sales := []sale{
				{"A", 100, 6, false, 0}, {"B", 1000, 5, false, 0}, {"C", 10, 4, false, 0}, {"D", 20, 4, false, 0},
				{"E", 7, 1, false, 0}, {"F", 9, 1, false, 0}, {"G", 1, 50, true, 0},
				{"old", 5, 40, false, 72 + 1.0/60}, {"recent", 3, 2, false, 72 - 1.0/60},
			}
			s.createUser("ranker", 1_000_000)
			type want struct {
				id             string
				units, revenue int
			}
			var counted []want
			for i, sl := range sales {
				id := s.createProduct(sl.name, sl.price, 100)
				order := s.placeOrder("ranker", id, sl.units, "")
				if sl.pending {
					continue
				}
				if sl.ageHours > 0 {
					paidAt := time.Now().Add(-time.Duration(sl.ageHours * float64(time.Hour)))
					if err := s.stores.Orders.MarkPaid(context.Background(), order, paidAt); err != nil {
						t.Fatalf("pay %s in the past: %v", sl.name, err)
					}
					if sl.ageHours > 72 {
						continue
					}
				} else if res := s.pay("ranker", order, fmt.Sprintf("rank%d", i)); res.status != http.StatusOK {
					t.Fatalf("pay %s: %d %s", sl.name, res.status, res.raw)
				}
				counted = append(counted, want{id, sl.units, sl.units * sl.price})
			}
			slices.SortFunc(counted, func(a, b want) int { return cmp.Or(cmp.Compare(b.units, a.units), cmp.Compare(a.id, b.id)) })
			counted = counted[:5]

			res := s.do("GET", "/api/products/top", s.token("u1"), "")
			var top struct {
				Period   string `json:"period"`
				Products []struct {
					Rank       int    `json:"rank"`
					ProductID  string `json:"productId"`
					Name       string `json:"name"`
					SalesCount int    `json:"salesCount"`
					Revenue    int    `json:"revenue"`
				} `json:"products"`
			}
			if err := json.Unmarshal(res.raw, &top); err != nil || res.status != http.StatusOK || top.Period != "3days" || len(top.Products) != 5 {
				t.Fatalf("top: %d %s", res.status, res.raw)
			}
			for i, p := range top.Products {
				if w := counted[i]; p.Rank != i+1 || p.ProductID != w.id || p.SalesCount != w.units || p.Revenue != w.revenue || p.Name == "" {
					t.Fatalf("rank %d: %+v, want %+v (all %s)", i+1, p, w, res.raw)
				}
			}
		})
	}
}
