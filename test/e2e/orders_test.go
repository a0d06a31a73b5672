package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testkit"
)

// absentID is a well-formed id nothing is stored under.
const absentID = "0190a0b0-0000-7000-8000-000000000000"

func (s *server) createProduct(name string, price, stock int) string {
	s.t.Helper()
	res := s.do("POST", "/admin/products", s.adminToken(), fmt.Sprintf(`{"name":%q,"price":%d,"stock":%d}`, name, price, stock))
	if res.status != http.StatusCreated || res.str("id") == "" {
		s.t.Fatalf("create product: %d %s", res.status, res.raw)
	}
	return res.str("id")
}

func (s *server) addToCart(user, productID string, quantity int) response {
	return s.do("POST", "/api/cart/items", s.token(user), fmt.Sprintf(`{"productId":%q,"quantity":%d}`, productID, quantity))
}

// cartOf is the user's cart as the API answers it.
type cartOf struct {
	UserID string `json:"userId"`
	Items  []struct {
		CartItemID     string `json:"cartItemId"`
		ProductID      string `json:"productId"`
		Name           string `json:"name"`
		UnitPrice      int    `json:"unitPrice"`
		Quantity       int    `json:"quantity"`
		Subtotal       int    `json:"subtotal"`
		StockAvailable bool   `json:"stockAvailable"`
		CurrentStock   int    `json:"currentStock"`
	} `json:"items"`
	TotalAmount int `json:"totalAmount"`
}

func (s *server) cart(user string) cartOf {
	s.t.Helper()
	res := s.do("GET", "/api/cart", s.token(user), "")
	if res.status != http.StatusOK {
		s.t.Fatalf("get cart: %d %s", res.status, res.raw)
	}
	var c cartOf
	if err := json.Unmarshal(res.raw, &c); err != nil {
		s.t.Fatal(err)
	}
	return c
}

// shopRows counts the commerce rows straight from the database: products, carts,
// cart_items, orders, order_items, and the user's carts and orders. On memory it is empty.
func (s *server) shopRows(user string) string {
	s.t.Helper()
	if s.db == nil {
		return ""
	}
	var counts []string
	for _, q := range []string{
		"SELECT COUNT(*) FROM products", "SELECT COUNT(*) FROM stock", "SELECT COALESCE(SUM(quantity), 0) FROM stock",
		"SELECT COUNT(*) FROM carts", "SELECT COUNT(*) FROM cart_items", "SELECT COALESCE(SUM(quantity), 0) FROM cart_items",
		"SELECT COUNT(*) FROM orders", "SELECT COUNT(*) FROM order_items",
	} {
		var n int
		if err := s.db.QueryRow(q).Scan(&n); err != nil {
			s.t.Fatalf("%s: %v", q, err)
		}
		counts = append(counts, fmt.Sprintf("%s=%d", q, n))
	}
	for _, q := range []string{"SELECT COUNT(*) FROM carts WHERE user_id = ?", "SELECT COUNT(*) FROM orders WHERE user_id = ?"} {
		var n int
		if err := s.db.QueryRow(s.query(q), user).Scan(&n); err != nil {
			s.t.Fatalf("%s: %v", q, err)
		}
		counts = append(counts, fmt.Sprintf("%s=%d", q, n))
	}
	return strings.Join(counts, "\n")
}

// snapshot is everything a commerce request could change, as the API shows it (the user's cart,
// the products) and, on a database, as the tables hold it.
func (s *server) shopSnapshot(user string, productIDs ...string) string {
	s.t.Helper()
	parts := []string{string(s.do("GET", "/api/cart", s.token(user), "").raw)}
	for _, id := range productIDs {
		parts = append(parts, string(s.do("GET", "/api/products/"+id, s.token(user), "").raw))
	}
	return strings.Join(append(parts, s.shopRows(user)), "\n")
}

// TestCommerce_EveryStatus walks every answer for products, the cart and orders on
// every backend.
func TestCommerce_EveryStatus(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b)

			created := s.do("POST", "/admin/products", s.adminToken(), `{"name":"상품A","price":10000,"stock":50}`)
			if created.status != http.StatusCreated || created.str("name") != "상품A" || created.num("price") != 10000 ||
				created.num("stock") != 50 || created.header.Get("Location") != "/api/products/"+created.str("id") {
				t.Fatalf("create product: %d %s", created.status, created.raw)
			}
			a := created.str("id")
			bID := s.createProduct("상품B", 20000, 5)
			s.createProduct("🏃 "+strings.Repeat("é", 198), 1, 0) // 200 characters, four-byte ones included, on every backend
			assertError(t, s.do("POST", "/admin/products", s.token("u1"), `{"name":"x","price":1,"stock":1}`), http.StatusForbidden, "FORBIDDEN")
			if got := s.do("GET", "/api/products/"+a, s.token("u1"), ""); got.status != http.StatusOK || string(got.raw) != string(created.raw) {
				t.Fatalf("get product: %d %s, created %s", got.status, got.raw, created.raw)
			}
			assertError(t, s.do("GET", "/api/products/"+absentID, s.token("u1"), ""), http.StatusNotFound, "PRODUCT_NOT_FOUND")

			empty := s.do("GET", "/api/cart", s.token("u1"), "")
			if empty.status != http.StatusOK || string(empty.raw) != `{"userId":"u1","items":[],"totalAmount":0}` {
				t.Fatalf("empty cart: %d %s", empty.status, empty.raw)
			}

			first := s.addToCart("u1", a, 2)
			if first.status != http.StatusCreated || first.str("productId") != a || first.num("quantity") != 2 ||
				first.str("cartItemId") == "" || first.str("addedAt") == "" {
				t.Fatalf("add: %d %s", first.status, first.raw)
			}
			more := s.addToCart("u1", a, 3)
			if more.status != http.StatusCreated || more.num("quantity") != 5 || more.str("cartItemId") != first.str("cartItemId") ||
				more.str("addedAt") != first.str("addedAt") {
				t.Fatalf("add to the same line: %d %s after %s", more.status, more.raw, first.raw)
			}
			short := s.addToCart("u1", bID, 6)
			assertError(t, short, http.StatusBadRequest, "INSUFFICIENT_STOCK")
			if short.str("productId") != bID {
				t.Fatalf("INSUFFICIENT_STOCK names %q, want %q", short.str("productId"), bID)
			}
			assertError(t, s.addToCart("u1", a, 46), http.StatusBadRequest, "INSUFFICIENT_STOCK") // 5 + 46 > 50
			assertError(t, s.addToCart("u1", absentID, 1), http.StatusNotFound, "PRODUCT_NOT_FOUND")
			if res := s.addToCart("u1", bID, 5); res.status != http.StatusCreated {
				t.Fatalf("add B: %d %s", res.status, res.raw)
			}

			c := s.cart("u1")
			if c.UserID != "u1" || len(c.Items) != 2 || c.TotalAmount != 5*10000+5*20000 {
				t.Fatalf("cart: %+v", c)
			}
			if l := c.Items[0]; l.ProductID != a || l.Name != "상품A" || l.UnitPrice != 10000 || l.Quantity != 5 ||
				l.Subtotal != 50000 || !l.StockAvailable || l.CurrentStock != 50 || l.CartItemID != first.str("cartItemId") {
				t.Fatalf("line A: %+v", l)
			}
			if l := c.Items[1]; l.ProductID != bID || l.Quantity != 5 || l.Subtotal != 100000 || !l.StockAvailable || l.CurrentStock != 5 {
				t.Fatalf("line B: %+v", l)
			}
			if other := s.cart("u2"); len(other.Items) != 0 || other.TotalAmount != 0 {
				t.Fatalf("another user's cart: %+v", other)
			}
			assertError(t, s.do("GET", "/api/cart?userId=u1", s.token("u2"), ""), http.StatusForbidden, "FORBIDDEN")
			if res := s.do("GET", "/api/cart?userId=u1", s.adminToken(), ""); res.status != http.StatusOK || res.str("userId") != "u1" {
				t.Fatalf("admin reads u1's cart: %d %s", res.status, res.raw)
			}

			placed := s.do("POST", "/api/orders", s.token("u1"), "")
			if placed.status != http.StatusCreated || placed.str("status") != "PENDING" || placed.num("subtotalAmount") != 150000 ||
				placed.num("discountAmount") != 0 || placed.num("totalAmount") != 150000 || placed.body["paidAt"] != nil ||
				placed.body["couponId"] != nil || placed.str("userId") != "u1" {
				t.Fatalf("place: %d %s", placed.status, placed.raw)
			}
			items, _ := placed.body["items"].([]any)
			if len(items) != 2 {
				t.Fatalf("order items: %s", placed.raw)
			}
			if it := items[0].(map[string]any); it["productId"] != a || it["name"] != "상품A" || it["quantity"] != 5.0 ||
				it["unitPrice"] != 10000.0 || it["subtotal"] != 50000.0 {
				t.Fatalf("order item A: %v", it)
			}
			if c := s.cart("u1"); len(c.Items) != 0 || c.TotalAmount != 0 {
				t.Fatalf("cart after the order: %+v", c)
			}
			assertError(t, s.do("POST", "/api/orders", s.token("u1"), ""), http.StatusBadRequest, "EMPTY_CART")
			assertError(t, s.do("POST", "/api/orders", s.token("never-added"), `{}`), http.StatusBadRequest, "EMPTY_CART")

			orderID := placed.str("orderId")
			if got := s.do("GET", "/api/orders/"+orderID, s.token("u1"), ""); got.status != http.StatusOK || string(got.raw) != string(placed.raw) {
				t.Fatalf("get order: %d %s, placed %s", got.status, got.raw, placed.raw)
			}
			if got := s.do("GET", "/api/orders/"+orderID, s.adminToken(), ""); got.status != http.StatusOK || string(got.raw) != string(placed.raw) {
				t.Fatalf("admin gets order: %d %s", got.status, got.raw)
			}
			assertError(t, s.do("GET", "/api/orders/"+orderID, s.token("u2"), ""), http.StatusNotFound, "ORDER_NOT_FOUND")
			assertError(t, s.do("GET", "/api/orders/"+absentID, s.token("u1"), ""), http.StatusNotFound, "ORDER_NOT_FOUND")
			assertError(t, s.do("GET", "/api/orders/not-an-id", s.token("u1"), ""), http.StatusBadRequest, "VALIDATION_FAILED")
		})
	}
}

// TestOrder_IdempotencyKeyReplaysThePlacedOrder: a retry with the key answers the placed order,
// not EMPTY_CART; the key with another body is refused; without a key nothing is replayed.
func TestOrder_IdempotencyKeyReplaysThePlacedOrder(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b)
			p := s.createProduct("pen", 1500, 10)
			if res := s.addToCart("u1", p, 3); res.status != http.StatusCreated {
				t.Fatalf("add: %d %s", res.status, res.raw)
			}
			key := []string{"Idempotency-Key", s.run + "order"}
			placed := s.do("POST", "/api/orders", s.token("u1"), "", key...)
			if placed.status != http.StatusCreated || placed.header.Get("Idempotent-Replayed") != "" || placed.num("totalAmount") != 4500 {
				t.Fatalf("place: %d %s", placed.status, placed.raw)
			}
			replay := s.do("POST", "/api/orders", s.token("u1"), "", key...)
			if replay.status != http.StatusCreated || replay.header.Get("Idempotent-Replayed") != "true" || string(replay.raw) != string(placed.raw) {
				t.Fatalf("replay: %d %v %s", replay.status, replay.header, replay.raw)
			}
			assertError(t, s.do("POST", "/api/orders", s.token("u1"), `{"couponId":"`+absentID+`"}`, key...),
				http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED")
			assertError(t, s.do("POST", "/api/orders", s.token("u1"), ""), http.StatusBadRequest, "EMPTY_CART")
			if rows := s.shopRows("u1"); s.db != nil && !strings.Contains(rows, "FROM orders WHERE user_id = ?=1") {
				t.Fatalf("one order expected:\n%s", rows)
			}
		})
	}
}

// TestOrder_InsufficientStockNamesTheProductAndKeepsTheCart lowers the stock under a line
// (as a payment of another order would) and orders: 400 INSUFFICIENT_STOCK naming the product,
// no order, the cart intact and marked unavailable. Only a database can lower stock outside the
// payment flow, so this runs on the SQL backends.
func TestOrder_InsufficientStockNamesTheProductAndKeepsTheCart(t *testing.T) {
	for _, b := range backends(t) {
		if b.name == "memory" {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b)
			plenty, scarce := s.createProduct("plenty", 100, 100), s.createProduct("scarce", 100, 10)
			s.addToCart("u1", plenty, 1)
			s.addToCart("u1", scarce, 4)
			if _, err := s.db.Exec(s.query("UPDATE stock SET quantity = 3, version = version + 1 WHERE product_id = ?"), scarce); err != nil {
				t.Fatal(err)
			}
			before := s.shopSnapshot("u1", plenty, scarce)
			res := s.do("POST", "/api/orders", s.token("u1"), "")
			assertError(t, res, http.StatusBadRequest, "INSUFFICIENT_STOCK")
			if res.str("productId") != scarce {
				t.Fatalf("names %q, want %q", res.str("productId"), scarce)
			}
			if after := s.shopSnapshot("u1", plenty, scarce); after != before {
				t.Fatalf("a refused order changed state:\n%s\nvs\n%s", before, after)
			}
			c := s.cart("u1")
			if len(c.Items) != 2 || c.Items[1].StockAvailable || c.Items[1].CurrentStock != 3 || !c.Items[0].StockAvailable {
				t.Fatalf("cart: %+v", c)
			}
		})
	}
}

// TestCart_ConcurrentAddsLoseNoIncrement: one user's first adds race (one cart must come of
// them) and every add of one product raises one line; a second product's adds interleave.
func TestCart_ConcurrentAddsLoseNoIncrement(t *testing.T) {
	const adds = 60
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b)
			p, q := s.createProduct("hot", 100, 1000), s.createProduct("warm", 300, 1000)
			counts, answers := fire(adds, func(i int) response {
				if i%3 == 0 {
					return s.addToCart("racer", q, 2)
				}
				return s.addToCart("racer", p, 1)
			})
			for _, a := range answers {
				if a.status != http.StatusCreated {
					t.Fatalf("add: %d %s (all %v)", a.status, a.raw, counts)
				}
			}
			c := s.cart("racer")
			if len(c.Items) != 2 || c.Items[0].Quantity+c.Items[1].Quantity != 40+2*20 || c.TotalAmount != 40*100+40*300 {
				t.Fatalf("cart after %d concurrent adds: %+v", adds, c)
			}
			if rows := s.shopRows("racer"); s.db != nil && !strings.Contains(rows, "FROM carts WHERE user_id = ?=1") {
				t.Fatalf("one cart expected:\n%s", rows)
			}
		})
	}
}

// TestCart_ConcurrentAddsNeverExceedTheStock: 50 adds of one unit race for a stock of 30: each
// add's check sees the line's committed total, so exactly 30 succeed.
func TestCart_ConcurrentAddsNeverExceedTheStock(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b)
			p := s.createProduct("scarce", 100, 30)
			counts, answers := fire(50, func(int) response { return s.addToCart("racer", p, 1) })
			for _, a := range answers {
				if a.status != http.StatusCreated && (a.status != http.StatusBadRequest || a.str("error") != "INSUFFICIENT_STOCK") {
					t.Fatalf("add: %d %s", a.status, a.raw)
				}
			}
			if counts[http.StatusCreated] != 30 {
				t.Fatalf("statuses %v, want 30 × 201", counts)
			}
			if c := s.cart("racer"); len(c.Items) != 1 || c.Items[0].Quantity != 30 || !c.Items[0].StockAvailable {
				t.Fatalf("cart: %+v", c)
			}
		})
	}
}

// TestCart_TwoInstancesShareOneCart: adds to one cart line up per instance, so two servers on
// one database meet on the cart's row lock: 60 adds of one unit split over both race for a stock
// of 30 beside 20 adds of another product. Exactly 30 fit, and no unit of either is lost.
func TestCart_TwoInstancesShareOneCart(t *testing.T) {
	for _, b := range backends(t)[1:] {
		t.Run(b.name, func(t *testing.T) {
			b.shareStorage(t)
			instances := []*server{startServer(t, b), startServer(t, b)}
			first := instances[0]
			scarce, plenty := first.createProduct("scarce", 100, 30), first.createProduct("plenty", 10, 1000)
			counts, answers := fire(80, func(i int) response {
				if i%4 == 3 {
					return instances[i%2].addToCart("racer", plenty, 1)
				}
				return instances[i%2].addToCart("racer", scarce, 1)
			})
			for i, a := range answers {
				if a.status != http.StatusCreated && (i%4 == 3 || a.status != http.StatusBadRequest || a.str("error") != "INSUFFICIENT_STOCK") {
					t.Fatalf("add %d: %d %s (all %v)", i, a.status, a.raw, counts)
				}
			}
			if counts[http.StatusCreated] != 30+20 {
				t.Fatalf("statuses %v, want 30 + 20 × 201", counts)
			}
			c := instances[1].cart("racer")
			if len(c.Items) != 2 || c.TotalAmount != 30*100+20*10 {
				t.Fatalf("cart: %+v", c)
			}
			if rows := first.shopRows("racer"); !strings.Contains(rows, "FROM carts WHERE user_id = ?=1") {
				t.Fatalf("one cart expected:\n%s", rows)
			}
		})
	}
}

// TestOrder_ConcurrentOrdersOfOneCartMakeOneOrder: 20 orders of one cart race; the cart's row
// lock lets one take the lines, and the others find the cart empty.
func TestOrder_ConcurrentOrdersOfOneCartMakeOneOrder(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b)
			p, q := s.createProduct("a", 1000, 100), s.createProduct("b", 250, 100)
			s.addToCart("buyer", p, 2)
			s.addToCart("buyer", q, 4)
			token := s.token("buyer")
			counts, answers := fire(20, func(int) response { return s.do("POST", "/api/orders", token, "") })
			var orderID string
			for _, a := range answers {
				switch {
				case a.status == http.StatusCreated:
					orderID = a.str("orderId")
					if a.num("totalAmount") != 3000 {
						t.Fatalf("order: %s", a.raw)
					}
				case a.status == http.StatusBadRequest && a.str("error") == "EMPTY_CART":
				default:
					t.Fatalf("order: %d %s", a.status, a.raw)
				}
			}
			if counts[http.StatusCreated] != 1 {
				t.Fatalf("statuses %v, want one 201", counts)
			}
			if c := s.cart("buyer"); len(c.Items) != 0 {
				t.Fatalf("cart after the order: %+v", c)
			}
			got := s.do("GET", "/api/orders/"+orderID, token, "")
			if items, _ := got.body["items"].([]any); got.status != http.StatusOK || len(items) != 2 {
				t.Fatalf("order: %d %s", got.status, got.raw)
			}
			if rows := s.shopRows("buyer"); s.db != nil &&
				(!strings.Contains(rows, "FROM orders WHERE user_id = ?=1") || !strings.Contains(rows, "FROM order_items=2") ||
					!strings.Contains(rows, "FROM cart_items=0")) {
				t.Fatalf("rows:\n%s", rows)
			}
		})
	}
}

// TestCommerce_BadInputAnswersErrorJSONAndChangesNothing sends every kind of bad commerce request
// and checks that the cart, the products and the tables are as they were.
func TestCommerce_BadInputAnswersErrorJSONAndChangesNothing(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b)
			p := s.createProduct("widget", 700, 20)
			priced := s.createProduct("diamond", 9007199254740992, 5)
			if res := s.addToCart("victim", p, 2); res.status != http.StatusCreated {
				t.Fatalf("add: %d %s", res.status, res.raw)
			}
			user, admin := s.token("victim"), s.adminToken()
			cases := []struct {
				name, method, path, token, body string
				status                          int
				code                            string
			}{
				{"quantity 0", "POST", "/api/cart/items", user, `{"productId":"` + p + `","quantity":0}`, 400, "VALIDATION_FAILED"},
				{"negative quantity", "POST", "/api/cart/items", user, `{"productId":"` + p + `","quantity":-3}`, 400, "VALIDATION_FAILED"},
				{"absurd quantity", "POST", "/api/cart/items", user, `{"productId":"` + p + `","quantity":1001}`, 400, "VALIDATION_FAILED"},
				{"huge quantity", "POST", "/api/cart/items", user, `{"productId":"` + p + `","quantity":99999999999999999999}`, 400, "VALIDATION_FAILED"},
				{"fractional quantity", "POST", "/api/cart/items", user, `{"productId":"` + p + `","quantity":1.5}`, 400, "VALIDATION_FAILED"},
				{"string quantity", "POST", "/api/cart/items", user, `{"productId":"` + p + `","quantity":"2"}`, 400, "VALIDATION_FAILED"},
				{"line past 1000", "POST", "/api/cart/items", user, `{"productId":"` + p + `","quantity":999}`, 400, "VALIDATION_FAILED"},
				{"missing product", "POST", "/api/cart/items", user, `{"quantity":1}`, 400, "VALIDATION_FAILED"},
				{"malformed product id", "POST", "/api/cart/items", user, `{"productId":"p1","quantity":1}`, 400, "VALIDATION_FAILED"},
				{"unknown product", "POST", "/api/cart/items", user, `{"productId":"` + absentID + `","quantity":1}`, 404, "PRODUCT_NOT_FOUND"},
				{"unknown field", "POST", "/api/cart/items", user, `{"productId":"` + p + `","quantity":1,"price":1}`, 400, "VALIDATION_FAILED"},
				{"another user's id", "POST", "/api/cart/items", user, `{"userId":"other","productId":"` + p + `","quantity":1}`, 403, "FORBIDDEN"},
				{"malformed JSON", "POST", "/api/cart/items", user, `{"productId":`, 400, "VALIDATION_FAILED"},
				{"no token", "POST", "/api/cart/items", "", `{"productId":"` + p + `","quantity":1}`, 401, "UNAUTHORIZED"},
				{"total overflows", "POST", "/api/cart/items", user, `{"productId":"` + priced + `","quantity":2}`, 400, "AMOUNT_OVERFLOW"},
				{"unknown coupon", "POST", "/api/orders", user, `{"couponId":"` + absentID + `"}`, 400, "INVALID_COUPON"},
				{"malformed coupon", "POST", "/api/orders", user, `{"couponId":"C001"}`, 400, "VALIDATION_FAILED"},
				{"unknown order field", "POST", "/api/orders", user, `{"coupon":"x"}`, 400, "VALIDATION_FAILED"},
				{"order as another user", "POST", "/api/orders", user, `{"userId":"other"}`, 403, "FORBIDDEN"},
				{"negative price", "POST", "/admin/products", admin, `{"name":"x","price":-1,"stock":1}`, 400, "VALIDATION_FAILED"},
				{"price past the maximum", "POST", "/admin/products", admin, `{"name":"x","price":9007199254740993,"stock":1}`, 400, "VALIDATION_FAILED"},
				{"negative stock", "POST", "/admin/products", admin, `{"name":"x","price":1,"stock":-1}`, 400, "VALIDATION_FAILED"},
				{"missing price", "POST", "/admin/products", admin, `{"name":"x","stock":1}`, 400, "VALIDATION_FAILED"},
				{"missing stock", "POST", "/admin/products", admin, `{"name":"x","price":1}`, 400, "VALIDATION_FAILED"},
				{"empty name", "POST", "/admin/products", admin, `{"name":"","price":1,"stock":1}`, 400, "VALIDATION_FAILED"},
				{"control character in name", "POST", "/admin/products", admin, `{"name":"a\u0000b","price":1,"stock":1}`, 400, "VALIDATION_FAILED"},
				{"unknown product field", "POST", "/admin/products", admin, `{"name":"x","price":1,"stock":1,"sku":"s"}`, 400, "VALIDATION_FAILED"},
				{"user creates product", "POST", "/admin/products", user, `{"name":"x","price":1,"stock":1}`, 403, "FORBIDDEN"},
				{"NUL as a product id", "GET", "/api/products/%00", user, "", 400, "VALIDATION_FAILED"},
				{"invalid UTF-8 as an order id", "GET", "/api/orders/%FF", user, "", 400, "VALIDATION_FAILED"},
				{"NUL in the cart's user id", "GET", "/api/cart?userId=a%00b", admin, "", 400, "VALIDATION_FAILED"},
				{"name over 200 characters", "POST", "/admin/products", admin, `{"name":"` + strings.Repeat("é", 201) + `","price":1,"stock":1}`, 400, "VALIDATION_FAILED"},
			}
			before := s.shopSnapshot("victim", p, priced)
			for _, tc := range cases {
				res := s.do(tc.method, tc.path, tc.token, tc.body)
				if res.status != tc.status || res.str("error") != tc.code || res.str("message") == "" {
					t.Errorf("%s: want %d %s, got %d %s", tc.name, tc.status, tc.code, res.status, res.raw)
				}
			}
			if after := s.shopSnapshot("victim", p, priced); after != before {
				t.Fatalf("bad input changed state:\n%s\nvs\n%s", before, after)
			}
		})
	}
}

// heldCoupon creates a 10% coupon through the admin route and issues it to user, returning the
// coupon's id and the user coupon's.
func (s *server) heldCoupon(user string) (couponID, userCouponID string) {
	s.t.Helper()
	couponID = s.createCoupon(10)
	issued := s.issue(couponID, user)
	if issued.status != http.StatusCreated {
		s.t.Fatalf("issue coupon: %d %s", issued.status, issued.raw)
	}
	return couponID, issued.str("userCouponId")
}

// TestOrder_CouponDiscountsAndInvalidCouponsAreRefused: a held coupon discounts the order by its
// rate rounded down; another user's coupon and a used one are INVALID_COUPON, and so, on a
// database (the only place its expiry can be moved), is an expired one; every refusal keeps the
// cart.
func TestOrder_CouponDiscountsAndInvalidCouponsAreRefused(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b)
			p := s.createProduct("lamp", 3333, 10)
			mine, _ := s.heldCoupon("u1")
			others, _ := s.heldCoupon("u2")
			used, usedUserCoupon := s.heldCoupon("u1")
			if err := s.stores.UserCoupons.MarkUsed(context.Background(), usedUserCoupon, time.Now().UTC()); err != nil {
				t.Fatal(err)
			}
			refused := []string{others, used}
			if s.db != nil {
				expired, _ := s.heldCoupon("u1")
				if _, err := s.db.Exec(s.query("UPDATE coupons SET expires_at = ? WHERE id = ?"), time.Now().Add(-time.Minute).UTC(), expired); err != nil {
					t.Fatal(err)
				}
				refused = append(refused, expired)
			}
			s.addToCart("u1", p, 3)

			before := s.shopSnapshot("u1", p)
			for _, id := range refused {
				assertError(t, s.do("POST", "/api/orders", s.token("u1"), `{"couponId":"`+id+`"}`), http.StatusBadRequest, "INVALID_COUPON")
			}
			if after := s.shopSnapshot("u1", p); after != before {
				t.Fatalf("a refused coupon changed state:\n%s\nvs\n%s", before, after)
			}

			placed := s.do("POST", "/api/orders", s.token("u1"), `{"couponId":"`+mine+`"}`)
			// 3 × 3333 = 9999; 10% = 999.9, rounded down.
			if placed.status != http.StatusCreated || placed.num("subtotalAmount") != 9999 || placed.num("discountAmount") != 999 ||
				placed.num("totalAmount") != 9000 || placed.str("couponId") != mine {
				t.Fatalf("place with coupon: %d %s", placed.status, placed.raw)
			}
		})
	}
}

// TestCommerce_DatabaseStoppedAnswers503Fast stops the database under a server with a cart and
// an order: every commerce route answers 503 UNAVAILABLE with Retry-After within the database
// timeout, never a hang or a 500, and once the database is back the cart and order are intact.
func TestCommerce_DatabaseStoppedAnswers503Fast(t *testing.T) {
	for _, newDatabase := range []func(*testing.T) privateDatabase{startPrivatePostgres, startPrivateMariaDB} {
		db := newDatabase(t)
		t.Run(db.name, func(t *testing.T) {
			s := startServer(t, backend{name: db.name, databaseURL: db.url, redisURL: redisURL(t)}, productionTimeouts)
			// The answer comes within the database timeout; a stopped server refuses at once, and
			// the slack is for scheduling on a busy machine.
			bound := bootstrap.DefaultConfig().Database.Timeout + 4*time.Second
			p := s.createProduct("kept", 100, 10)
			s.addToCart("u1", p, 2)
			placed := s.do("POST", "/api/orders", s.token("u1"), "")
			s.addToCart("u1", p, 1)
			cartBefore := s.do("GET", "/api/cart", s.token("u1"), "")

			db.stop(t)
			user := s.token("u1")
			for _, call := range []struct{ method, path, token, body string }{
				{"POST", "/admin/products", s.adminToken(), `{"name":"x","price":1,"stock":1}`},
				{"GET", "/api/products/" + p, user, ""},
				{"POST", "/api/cart/items", user, `{"productId":"` + p + `","quantity":1}`},
				{"GET", "/api/cart", user, ""},
				{"POST", "/api/orders", user, ""},
				{"GET", "/api/orders/" + placed.str("orderId"), user, ""},
			} {
				start := time.Now()
				res := s.do(call.method, call.path, call.token, call.body)
				took := time.Since(start)
				assertError(t, res, http.StatusServiceUnavailable, "UNAVAILABLE")
				if res.header.Get("Retry-After") == "" || took > bound {
					t.Errorf("%s %s: Retry-After %q after %v", call.method, call.path, res.header.Get("Retry-After"), took)
				}
			}

			db.start(t)
			testkit.Eventually(t, 30*time.Second, "the server reads the cart again", func() error {
				if res := s.do("GET", "/api/cart", user, ""); res.status != http.StatusOK {
					return fmt.Errorf("cart: %d %s", res.status, res.raw)
				}
				return nil
			})
			if got := s.do("GET", "/api/cart", user, ""); string(got.raw) != string(cartBefore.raw) {
				t.Fatalf("cart after the outage: %s, before %s", got.raw, cartBefore.raw)
			}
			if got := s.do("GET", "/api/orders/"+placed.str("orderId"), user, ""); string(got.raw) != string(placed.raw) {
				t.Fatalf("order after the outage: %s, placed %s", got.raw, placed.raw)
			}
		})
	}
}
