package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/rushgate/rushgate/domain/commerce/coupon"
	domainorder "github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/test/testkit"
)

// TestCommerce_PaymentsChargesAndCancelsRacingKeepEveryInvariant: each of a few users holds a
// coupon and several PENDING orders of two products each (the pairs overlap in a ring, so
// payments of different lock keys deduct the same stocks), two of them naming the coupon. All
// at once, through two instances on a database, each order is paid twice with one key (the
// replay racing the first request), one order of each user is cancelled, and each user is
// charged twice; the balances and the stocks are short, so some payments are refused. Then, whatever the interleaving: each balance equals
// its ledger's sum and its opening plus the charges minus the paid orders' totals, never
// negative; each stock is its opening minus the units of paid orders, as its history says,
// never negative; a coupon is USED exactly when one paid order names it, never by two; every
// paid order has one outbox message and no other order any; and every answer agrees with the
// order it acted on (a request of the key that paid may have been refused before it, as the
// refusal deleted the key).
func TestCommerce_PaymentsChargesAndCancelsRacingKeepEveryInvariant(t *testing.T) {
	const (
		users, products, ordersEach = 4, 4, 4
		price, stock, opening       = 100, 6, 300
		charge                      = 100
	)
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			// On a database two instances share it and Redis, and the requests alternate
			// between them, so the lanes of one lock key meet on Redis and the database too.
			b.shareStorage(t)
			s := startServer(t, b)
			instances := []*server{s}
			if b.databaseURL != "" {
				other := startServer(t, b)
				other.run = s.run // one key means the same request on either instance
				instances = append(instances, other)
			}
			productIDs := make([]string, products)
			for p := range productIDs {
				productIDs[p] = s.createProduct(fmt.Sprintf("ring-%d", p), price, stock)
			}
			userIDs, coupons := make([]string, users), make([]string, users)
			orders := make([][]string, users)
			for u := range userIDs {
				userIDs[u] = fmt.Sprintf("ring-buyer-%d", u)
				s.createUser(userIDs[u], opening)
				coupons[u], _ = s.heldCoupon(userIDs[u])
				for o := range ordersEach {
					for _, p := range []int{(u + o) % products, (u + o + 1) % products} {
						if res := s.addToCart(userIDs[u], productIDs[p], 1); res.status != http.StatusCreated {
							t.Fatalf("add to cart: %d %s", res.status, res.raw)
						}
					}
					body := ""
					if o < 2 {
						body = `{"couponId":"` + coupons[u] + `"}`
					}
					placed := s.do("POST", "/api/orders", s.token(userIDs[u]), body)
					if placed.status != http.StatusCreated {
						t.Fatalf("place order: %d %s", placed.status, placed.raw)
					}
					orders[u] = append(orders[u], placed.str("orderId"))
				}
			}

			// Per user: two payments of each order with its one key, a cancel of its last order,
			// two charges.
			const perUser = 2*ordersEach + 1 + 2
			answers := make([]response, users*perUser)
			testkit.StartTogether(len(answers), func(i int) {
				u, call := i/perUser, i%perUser
				user, s := userIDs[u], instances[i%len(instances)]
				switch {
				case call < 2*ordersEach:
					o := call / 2
					answers[i] = s.pay(user, orders[u][o], fmt.Sprintf("pay-%d", o))
				case call == 2*ordersEach:
					answers[i] = s.cancel(user, orders[u][ordersEach-1])
				default:
					answers[i] = s.charge(user, fmt.Sprint(charge), fmt.Sprintf("charge-%d", call))
				}
			})

			heard := map[string]int{}
			for _, a := range answers {
				heard[fmt.Sprint(a.status, a.str("error"))]++
			}
			t.Logf("answers: %v", heard)

			ctx := context.Background()
			sold := make(map[string]int64, products)
			completedOrders := 0
			outbox := s.outboxOrders()
			for u, user := range userIDs {
				var paidTotal, charged int64
				couponPaid := 0
				for o, id := range orders[u] {
					stored, err := s.stores.Orders.Get(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					completed := stored.Status() == domainorder.StatusCompleted
					if completed {
						completedOrders++
						paidTotal += stored.Total()
						for _, item := range stored.Items() {
							sold[item.ProductID] += int64(item.Quantity)
						}
						if stored.CouponID() != "" {
							couponPaid++
						}
					}
					if want := map[bool]int{true: 1}[completed]; outbox[id] != want {
						t.Errorf("%s's order %d (%s) has %d outbox messages", user, o, stored.Status(), outbox[id])
					}
					pays := answers[u*perUser+2*o : u*perUser+2*o+2]
					paid := pays[0].status == http.StatusOK || pays[1].status == http.StatusOK
					for _, a := range pays {
						refused := a.status != http.StatusOK
						// A refusal deletes the key, so the other request may pay after it; once
						// paid, the key answers the payment, never that the order is paid.
						if paid != completed || refused && !isRefusedPayment(a) || refused && paid && a.str("error") == "ORDER_NOT_PAYABLE" {
							t.Errorf("%s's order %d is %s, its payment answered %d %s", user, o, stored.Status(), a.status, a.raw)
						}
					}
					if o == ordersEach-1 {
						a := answers[u*perUser+2*ordersEach]
						cancelled := a.status == http.StatusOK
						if cancelled != (stored.Status() == domainorder.StatusCancelled) ||
							!cancelled && (a.status != http.StatusBadRequest || a.str("error") != "ORDER_NOT_CANCELLABLE") {
							t.Errorf("%s's order %d is %s, its cancel answered %d %s", user, o, stored.Status(), a.status, a.raw)
						}
					}
				}
				for _, a := range answers[u*perUser+2*ordersEach+1 : (u+1)*perUser] {
					if a.status != http.StatusOK {
						t.Errorf("%s's charge: %d %s", user, a.status, a.raw)
						continue
					}
					charged += charge
				}
				w := s.wallet(user)
				if want := opening + charged - paidTotal; w.balance != want || w.ledgerSum != want || want < 0 {
					t.Errorf("%s: stored %+v, want balance == ledger sum == %d + %d − %d", user, w, opening, charged, paidTotal)
				}
				held, err := s.stores.UserCoupons.Get(ctx, user, coupons[u])
				if err != nil {
					t.Fatal(err)
				}
				if couponPaid > 1 || (held.Status() == coupon.Used) != (couponPaid == 1) {
					t.Errorf("%s's coupon is %s, %d paid orders name it", user, held.Status(), couponPaid)
				}
			}
			for _, p := range productIDs {
				if q, out := s.stockOf(p); q != stock-sold[p] || out != sold[p] || q < 0 {
					t.Errorf("product %s: stock %d, history out %d; paid orders hold %d of %d", p, q, out, sold[p], stock)
				}
			}
			if len(outbox) != completedOrders {
				t.Errorf("the outbox names %d orders, %d were paid", len(outbox), completedOrders)
			}
		})
	}
}

// isRefusedPayment tells the answers a payment racing others of its user and products may get
// instead of 200: its balance, its coupon or its stock taken by another, its order cancelled
// or paid, or its key still held by the same payment's first request.
func isRefusedPayment(a response) bool {
	switch a.str("error") {
	case "INSUFFICIENT_BALANCE", "INVALID_COUPON", "ORDER_NOT_PAYABLE":
		return a.status == http.StatusBadRequest
	case "STOCK_DEDUCTION_FAILED", "IDEMPOTENCY_IN_PROGRESS":
		return a.status == http.StatusConflict
	}
	return false
}
