package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain/commerce/coupon"
	"github.com/rushgate/rushgate/test/testkit"
)

func (s *server) cancel(user, orderID string) response {
	return s.do("POST", "/api/orders/"+orderID+"/cancel", s.token(user), "")
}

// paymentState is everything a payment of user's order could change, as the stores hold it
// (the user's balance and ledger, the product's stock and history, the user's coupon, the
// order, the outbox) and, on a database, the commerce tables' row counts.
func (s *server) paymentState(user, productID, couponID, orderID string) string {
	s.t.Helper()
	ctx := context.Background()
	_, stock, err := s.stores.Products.Get(ctx, productID)
	if err != nil {
		s.t.Fatal(err)
	}
	quantity, out := s.stockOf(productID)
	held, err := s.stores.UserCoupons.Get(ctx, user, couponID)
	if err != nil {
		s.t.Fatal(err)
	}
	o, err := s.stores.Orders.Get(ctx, orderID)
	if err != nil {
		s.t.Fatal(err)
	}
	return fmt.Sprintf("wallet %+v; stock %d (version %d), out %d; coupon %s %v; order %s %v; outbox %v\n%s",
		s.wallet(user), quantity, stock.Version(), out, held.Status(), held.UsedAt(), o.Status(), o.PaidAt(),
		s.outboxStatusCounts(), s.shopRows(user))
}

// TestPayment_CouponExpiredSinceTheOrderIsRefused: an order placed with a valid coupon is
// refused 400 INVALID_COUPON at payment once the server's clock reaches the coupon's expiry,
// with nothing changed (a retry with the same key is answered afresh: the key was deleted); the
// order can then be cancelled, and its coupon stays AVAILABLE.
func TestPayment_CouponExpiredSinceTheOrderIsRefused(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			clock := &shiftedClock{}
			s := startServerOnClock(t, b, clock)
			p := s.createProduct("ephemeral", 1000, 10)
			s.createUser("late", 10_000)
			couponID, _ := s.heldCoupon("late")
			orderID := s.placeOrder("late", p, 2, `{"couponId":"`+couponID+`"}`)
			c, err := s.stores.Coupons.Get(context.Background(), couponID)
			if err != nil {
				t.Fatal(err)
			}

			clock.advanceTo(c.ExpiresAt())
			before := s.paymentState("late", p, couponID, orderID)
			for range 2 {
				assertError(t, s.pay("late", orderID, "late-pay"), http.StatusBadRequest, "INVALID_COUPON")
				if after := s.paymentState("late", p, couponID, orderID); after != before {
					t.Fatalf("a refused payment changed state:\n%s\nvs\n%s", before, after)
				}
			}

			cancelled := s.cancel("late", orderID)
			if cancelled.status != http.StatusOK || cancelled.str("status") != "CANCELLED" || cancelled.str("couponId") != couponID {
				t.Fatalf("cancel: %d %s", cancelled.status, cancelled.raw)
			}
			held, err := s.stores.UserCoupons.Get(context.Background(), "late", couponID)
			if err != nil || held.Status() != coupon.Available {
				t.Fatalf("the cancelled order's coupon: %+v, %v", held, err)
			}
			s.assertWallet("late", 10_000, 1)
		})
	}
}

// TestOrderCancel_EveryStatus walks an order's cancel: two PENDING orders name one coupon, the
// first paid uses it, the second answers INVALID_COUPON and is cancelled (200, the order
// CANCELLED; again the same 200), after which paying it is ORDER_NOT_PAYABLE; another user is
// answered as reading the order answers them (404); an admin may cancel; a paid order is
// ORDER_NOT_CANCELLABLE; bad input is VALIDATION_FAILED.
func TestOrderCancel_EveryStatus(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b)
			p := s.createProduct("twice wanted", 1000, 10)
			s.createUser("buyer", 10_000)
			couponID, _ := s.heldCoupon("buyer")
			first := s.placeOrder("buyer", p, 1, `{"couponId":"`+couponID+`"}`)
			second := s.placeOrder("buyer", p, 1, `{"couponId":"`+couponID+`"}`)
			if res := s.pay("buyer", first, "first"); res.status != http.StatusOK || res.num("paidAmount") != 900 {
				t.Fatalf("pay the first: %d %s", res.status, res.raw)
			}
			assertError(t, s.pay("buyer", second, "second"), http.StatusBadRequest, "INVALID_COUPON")

			read := s.do("GET", "/api/orders/"+second, s.token("intruder"), "")
			assertError(t, read, http.StatusNotFound, "ORDER_NOT_FOUND")
			assertError(t, s.cancel("intruder", second), read.status, read.str("error"))
			assertError(t, s.cancel("buyer", absentID), http.StatusNotFound, "ORDER_NOT_FOUND")
			assertError(t, s.cancel("buyer", "not-a-uuid"), http.StatusBadRequest, "VALIDATION_FAILED")
			assertError(t, s.do("POST", "/api/orders/"+second+"/cancel", s.token("buyer"), `{"reason":"x"}`),
				http.StatusBadRequest, "VALIDATION_FAILED")
			assertError(t, s.do("POST", "/api/orders/"+second+"/cancel", "", ""), http.StatusUnauthorized, "UNAUTHORIZED")
			if got := s.do("GET", "/api/orders/"+second, s.token("buyer"), ""); got.str("status") != "PENDING" {
				t.Fatalf("refused cancels changed the order: %s", got.raw)
			}

			cancelled := s.cancel("buyer", second)
			if cancelled.status != http.StatusOK || cancelled.str("orderId") != second || cancelled.str("status") != "CANCELLED" ||
				cancelled.body["paidAt"] != nil || cancelled.num("totalAmount") != 900 {
				t.Fatalf("cancel: %d %s", cancelled.status, cancelled.raw)
			}
			if got := s.do("GET", "/api/orders/"+second, s.token("buyer"), ""); string(got.raw) != string(cancelled.raw) {
				t.Fatalf("the cancel answered %s, the order reads %s", cancelled.raw, got.raw)
			}
			if again := s.cancel("buyer", second); again.status != http.StatusOK || string(again.raw) != string(cancelled.raw) {
				t.Fatalf("second cancel: %d %s, want %s", again.status, again.raw, cancelled.raw)
			}
			assertError(t, s.pay("buyer", second, "after-cancel"), http.StatusBadRequest, "ORDER_NOT_PAYABLE")
			assertError(t, s.cancel("buyer", first), http.StatusBadRequest, "ORDER_NOT_CANCELLABLE")
			if got := s.do("GET", "/api/orders/"+first, s.token("buyer"), ""); got.str("status") != "COMPLETED" {
				t.Fatalf("the paid order after a refused cancel: %s", got.raw)
			}

			s.createUser("other", 10_000)
			theirs := s.placeOrder("other", p, 1, "")
			byAdmin := s.do("POST", "/api/orders/"+theirs+"/cancel", s.adminToken(), "{}")
			if byAdmin.status != http.StatusOK || byAdmin.str("status") != "CANCELLED" || byAdmin.str("userId") != "other" {
				t.Fatalf("admin cancel: %d %s", byAdmin.status, byAdmin.raw)
			}

			s.assertWallet("buyer", 9100, 2)
			s.assertWallet("other", 10_000, 1)
			if q, out := s.stockOf(p); q != 9 || out != 1 {
				t.Fatalf("stock %d, out %d", q, out)
			}
			if orders := s.outboxOrders(); len(orders) != 1 || orders[first] != 1 {
				t.Fatalf("outbox: %v", orders)
			}
		})
	}
}

// TestOrderCancel_RacingPaymentEndsInExactlyOne pays and cancels each of many orders at once
// (each order its own user's): every order ends COMPLETED with its cancel refused
// ORDER_NOT_CANCELLABLE, or CANCELLED with its payment refused ORDER_NOT_PAYABLE, never both;
// balances, ledgers, stock, stock history and the outbox count exactly the paid ones, and on a
// database the order rows say the same. The cancels are staggered so that some come before
// the payments, some while they run and some after; two waves with different staggers run,
// and a third when neither had both outcomes, spread over 3 s, longer than a payment may take.
func TestOrderCancel_RacingPaymentEndsInExactlyOne(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b)
			p := s.createProduct("contested", 100, 100_000)
			mixed := false
			for i, stagger := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 100 * time.Millisecond} {
				if i == 2 && mixed {
					break
				}
				paid, cancelled := s.payCancelWave(p, 30, stagger)
				t.Logf("cancels %v apart: %d paid, %d cancelled", stagger, len(paid), len(cancelled))
				mixed = mixed || len(paid) > 0 && len(cancelled) > 0
			}
			if !mixed {
				t.Fatal("no wave had both a payment and a cancel win")
			}
		})
	}
}

// payCancelWave places pairs orders of one unit of p (price 100) by new users with 1000 points,
// pays and cancels each at once, the i-th cancel i × stagger late, checks each pair and the
// totals, and returns the paid and the cancelled orders.
func (s *server) payCancelWave(p string, pairs int, stagger time.Duration) (paid, cancelled []string) {
	s.t.Helper()
	const price, balance = 100, 1000
	stockBefore, outBefore := s.stockOf(p)
	outboxBefore := s.outboxOrders()
	users, orders := make([]string, pairs), make([]string, pairs)
	for i := range pairs {
		users[i] = fmt.Sprintf("racer-%d-%d", stagger.Microseconds(), i)
		s.createUser(users[i], balance)
		orders[i] = s.placeOrder(users[i], p, 1, "")
	}
	pays, cancels := make([]response, pairs), make([]response, pairs)
	testkit.StartTogether(2*pairs, func(call int) {
		i := call / 2
		if call%2 == 0 {
			pays[i] = s.pay(users[i], orders[i], "race")
			return
		}
		time.Sleep(time.Duration(i) * stagger) // the stagger under test, not a wait for something
		cancels[i] = s.cancel(users[i], orders[i])
	})

	for i, id := range orders {
		pay, cancel := pays[i], cancels[i]
		status := s.do("GET", "/api/orders/"+id, s.token(users[i]), "").str("status")
		switch {
		case pay.status == http.StatusOK && cancel.status == http.StatusBadRequest &&
			cancel.str("error") == "ORDER_NOT_CANCELLABLE" && status == "COMPLETED":
			paid = append(paid, id)
			s.assertWallet(users[i], balance-price, 2)
		case cancel.status == http.StatusOK && cancel.str("status") == "CANCELLED" && pay.status == http.StatusBadRequest &&
			pay.str("error") == "ORDER_NOT_PAYABLE" && status == "CANCELLED":
			cancelled = append(cancelled, id)
			s.assertWallet(users[i], balance, 1)
		default:
			s.t.Fatalf("%s: pay %d %s, cancel %d %s, order %s", users[i], pay.status, pay.raw, cancel.status, cancel.raw, status)
		}
	}
	if q, out := s.stockOf(p); q != stockBefore-int64(len(paid)) || out != outBefore+int64(len(paid)) {
		s.t.Fatalf("stock %d, history out %d; want %d and %d", q, out, stockBefore-int64(len(paid)), outBefore+int64(len(paid)))
	}
	outbox := s.outboxOrders()
	if len(outbox) != len(outboxBefore)+len(paid) {
		s.t.Fatalf("%d orders in the outbox, want %d", len(outbox), len(outboxBefore)+len(paid))
	}
	for _, id := range paid {
		if outbox[id] != 1 {
			s.t.Fatalf("paid order %s has %d outbox messages", id, outbox[id])
		}
	}
	if s.db != nil {
		s.assertOrderRows(cancelled, "CANCELLED", false)
		s.assertOrderRows(paid, "COMPLETED", true)
	}
	return paid, cancelled
}

// assertOrderRows checks in the database that each order has status, with paid_at set or not,
// and that only a paid order has stock history rows.
func (s *server) assertOrderRows(ids []string, status string, paid bool) {
	s.t.Helper()
	for _, id := range ids {
		var (
			stored      string
			hasPaidAt   bool
			historyRows int
		)
		q := s.query("SELECT status, paid_at IS NOT NULL, (SELECT COUNT(*) FROM stock_history WHERE ref_id = o.id) FROM orders o WHERE id = ?")
		if err := s.db.QueryRow(q, id).Scan(&stored, &hasPaidAt, &historyRows); err != nil {
			s.t.Fatal(err)
		}
		if stored != status || hasPaidAt != paid || (historyRows == 1) != paid || historyRows > 1 {
			s.t.Fatalf("order %s: status %s, paid_at set %v, %d history rows; want %s, %v", id, stored, hasPaidAt, historyRows, status, paid)
		}
	}
}
