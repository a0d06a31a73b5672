package payment_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/payment"
	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/coupon"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/domain/commerce/wallet"
	"github.com/rushgate/rushgate/domain/outbox"
	"github.com/rushgate/rushgate/test/testkit"
)

// balance is user's stored balance, after checking it equals the sum of the user's ledger.
func (s *shop) balance(user string) int64 {
	s.t.Helper()
	ctx := context.Background()
	a, err := s.Stores.Wallets.Get(ctx, user)
	require.NoError(s.t, err)
	sum, _, err := s.Stores.Wallets.Totals(ctx, user)
	require.NoError(s.t, err)
	require.Equal(s.t, a.Balance(), sum, "%s: the balance is not the sum of its ledger", user)
	return a.Balance()
}

// delivered is what the data platform is told of a paid order: the outbox message's payload,
// read as the platform reads it.
type delivered struct {
	OrderID     string `json:"orderId"`
	TotalAmount int64  `json:"totalAmount"`
	Items       []struct {
		Quantity  int   `json:"quantity"`
		UnitPrice int64 `json:"unitPrice"`
		Subtotal  int64 `json:"subtotal"`
	} `json:"items"`
}

// pendingMessages decodes every PENDING outbox message.
func (s *shop) pendingMessages() []delivered {
	s.t.Helper()
	messages, _, err := s.Stores.Outbox.List(context.Background(), outbox.Pending, "", 100)
	require.NoError(s.t, err)
	out := make([]delivered, len(messages))
	for i, m := range messages {
		require.NoError(s.t, json.Unmarshal(m.Payload, &out[i]), "payload %s", m.Payload)
	}
	return out
}

// A balance that equals the order's total exactly pays it and is left at 0; one point less is
// refused INSUFFICIENT_BALANCE with nothing changed, and the refused key runs again on retry.
func TestPay_TheWholeBalancePaysAndOnePointShortChangesNothing(t *testing.T) {
	s := newShop(t)
	p := s.Product(1250, 10)
	s.User("exact", 2500)
	s.User("short", 2499)
	exact := s.Order("exact", p, 2, "")
	short := s.Order("short", p, 2, "")
	require.Equal(t, int64(2500), exact.TotalAmount)

	paid, err := s.pay("exact", exact.OrderID, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(2500), paid.Value.PaidAmount)
	assert.Equal(t, int64(0), paid.Value.RemainingBalance)
	assert.Equal(t, int64(0), s.balance("exact"))
	assert.Equal(t, order.StatusCompleted, s.status(exact.OrderID))

	before := s.state("short", p, "", short.OrderID)
	for range 2 {
		_, err := s.pay("short", short.OrderID, "k")
		require.ErrorIs(t, err, wallet.ErrInsufficientBalance)
		assert.Equal(t, before, s.state("short", p, "", short.OrderID), "a refused payment changed state")
	}
	assert.Equal(t, int64(2499), s.balance("short"))
	assert.Equal(t, order.StatusPending, s.status(short.OrderID))
}

// With a coupon, the outbox message announces the amount the user paid, not the subtotal:
// totalAmount == paidAmount == the order's discounted total, and its items add up to the
// subtotal the discount was taken from.
func TestPay_TheOutboxMessageCarriesTheDiscountedAmountPaid(t *testing.T) {
	s := newShop(t)
	p := s.Product(999, 10)
	s.User("u1", 10_000)
	sale := s.holdCoupon("u1", 15, time.Hour)
	placed := s.Order("u1", p, 3, sale)
	// 3 × 999 = 2997; 15% = 449.55, rounded down.
	require.Equal(t, int64(2997), placed.SubtotalAmount)
	require.Equal(t, int64(2548), placed.TotalAmount)

	paid, err := s.pay("u1", placed.OrderID, "k")
	require.NoError(t, err)
	assert.Equal(t, placed.TotalAmount, paid.Value.PaidAmount)
	assert.Equal(t, int64(10_000-2548), s.balance("u1"))

	messages := s.pendingMessages()
	require.Len(t, messages, 1)
	m := messages[0]
	assert.Equal(t, placed.OrderID, m.OrderID)
	assert.Equal(t, paid.Value.PaidAmount, m.TotalAmount, "totalAmount is the amount paid")
	var subtotal int64
	for _, item := range m.Items {
		assert.Equal(t, int64(item.Quantity)*item.UnitPrice, item.Subtotal)
		subtotal += item.Subtotal
	}
	assert.Equal(t, placed.SubtotalAmount, subtotal, "the items add up to the subtotal before the discount")
}

// A retry with the same key replays the first answer without paying again; another key for the
// paid order is ORDER_NOT_PAYABLE; the same key for another order is IDEMPOTENCY_KEY_REUSED. The
// money, stock, coupon and outbox move once.
func TestPay_TwiceMovesTheMoneyOnce(t *testing.T) {
	s := newShop(t)
	p := s.Product(400, 10)
	s.User("u1", 1000)
	sale := s.holdCoupon("u1", 50, time.Hour)
	first := s.Order("u1", p, 1, sale)
	other := s.Order("u1", p, 1, "")

	paid, err := s.pay("u1", first.OrderID, "k")
	require.NoError(t, err)
	assert.False(t, paid.Replayed)
	assert.Equal(t, guard.OutcomeDone, paid.Outcome)
	after := s.state("u1", p, sale, first.OrderID)

	replayed, err := s.pay("u1", first.OrderID, "k")
	require.NoError(t, err)
	assert.True(t, replayed.Replayed)
	// The answer as a client sees it; the first payment's outbox message id is its own.
	answer := func(r payment.Result) string {
		return fmt.Sprintf("%s paid %d, %d left, %s at %v", r.OrderID, r.PaidAmount, r.RemainingBalance, r.Status, r.PaidAt)
	}
	assert.Equal(t, answer(paid.Value), answer(replayed.Value), "the replay answers the first payment")
	assert.Equal(t, after, s.state("u1", p, sale, first.OrderID), "a replay changed state")

	_, err = s.pay("u1", first.OrderID, "another")
	require.ErrorIs(t, err, order.ErrNotPayable)
	_, err = s.pay("u1", other.OrderID, "k")
	require.ErrorIs(t, err, guard.ErrKeyReused)
	assert.Equal(t, after, s.state("u1", p, sale, first.OrderID), "a refused payment changed state")
	assert.Equal(t, int64(800), s.balance("u1"))
	assert.Equal(t, order.StatusPending, s.status(other.OrderID))
	assert.Equal(t, coupon.Used, s.couponStatus("u1", sale))
	assert.Equal(t, 1, s.outboxTotal())
}

// Many payments of one account at once, for orders of several products (so they run in
// several lanes, meeting only on the account's row), never overspend: exactly as many are paid
// as the balance covers, the rest are refused INSUFFICIENT_BALANCE and stay PENDING, and the
// balance, its ledger, the stock and the outbox count exactly the paid ones.
func TestPay_ConcurrentPaymentsOfOneAccountNeverOverspend(t *testing.T) {
	s := newShop(t)
	const price, payments, covered = 300, 60, 25
	products := []string{s.Product(price, 1000), s.Product(price, 1000), s.Product(price, 1000)}
	s.User("herd", price*covered+price-1) // covers 25 payments and most of a 26th
	orders := make([]string, payments)
	for i := range orders {
		orders[i] = s.Order("herd", products[i%len(products)], 1, "").OrderID
	}

	errs := make([]error, payments)
	testkit.StartTogether(payments, func(i int) { _, errs[i] = s.pay("herd", orders[i], fmt.Sprint("pay-", i)) })

	paid := 0
	for i, err := range errs {
		switch {
		case err == nil:
			paid++
			assert.Equal(t, order.StatusCompleted, s.status(orders[i]))
		case errors.Is(err, wallet.ErrInsufficientBalance):
			assert.Equal(t, order.StatusPending, s.status(orders[i]))
		default:
			t.Fatalf("payment %d: %v", i, err)
		}
	}
	assert.Equal(t, covered, paid, "payments paid")
	assert.Equal(t, int64(price-1), s.balance("herd"))
	_, entries, err := s.Stores.Wallets.Totals(context.Background(), "herd")
	require.NoError(t, err)
	assert.Equal(t, 1+covered, entries, "ledger entries: the opening and one per payment")
	var sold int64
	for _, p := range products {
		_, stock, err := s.Stores.Products.Get(context.Background(), p)
		require.NoError(t, err)
		sold += 1000 - stock.Quantity()
	}
	assert.Equal(t, int64(covered), sold, "units deducted")
	assert.Equal(t, covered, s.outboxTotal(), "outbox messages")
}

// A payment for more units than are left is refused STOCK_DEDUCTION_FAILED with nothing
// changed: the order was placed when the stock still covered it.
func TestPay_RefusesWhenTheStockNoLongerCoversTheOrder(t *testing.T) {
	s := newShop(t)
	p := s.Product(100, 3)
	s.User("first", 1000)
	s.User("second", 1000)
	taken := s.Order("first", p, 2, "")
	late := s.Order("second", p, 2, "")
	_, err := s.pay("first", taken.OrderID, "k")
	require.NoError(t, err)

	before := s.state("second", p, "", late.OrderID)
	_, err = s.pay("second", late.OrderID, "k")
	require.ErrorIs(t, err, catalog.ErrStockDeductionFailed)
	assert.Equal(t, before, s.state("second", p, "", late.OrderID), "a refused payment changed state")
	assert.Equal(t, int64(1000), s.balance("second"))
}
