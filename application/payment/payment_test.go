package payment_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/dataplatform"
	"github.com/rushgate/rushgate/adapters/memory/memorytest"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/application/guard"
	apporder "github.com/rushgate/rushgate/application/order"
	"github.com/rushgate/rushgate/application/payment"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce/coupon"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

// shop is the commerce use cases on memory (memorytest.Shop) and the steps of this file's
// tests.
type shop struct {
	*memorytest.Shop
	t *testing.T
}

func newShop(t *testing.T) *shop { return &shop{Shop: memorytest.NewShop(t), t: t} }

// holdCoupon is HoldCoupon's coupon id.
func (s *shop) holdCoupon(user string, rate int, ttl time.Duration) string {
	couponID, _ := s.HoldCoupon(user, rate, ttl)
	return couponID
}

func (s *shop) pay(user, orderID, key string) (guard.Result[payment.Result], error) {
	return s.Payments.Pay(context.Background(), payment.PayCommand{OrderID: orderID, UserID: user, IdempotencyKey: key})
}

func (s *shop) cancel(user, orderID string) (apporder.View, error) {
	return s.Orders.Cancel(context.Background(), apporder.CancelCommand{OrderID: orderID, UserID: user})
}

func (s *shop) status(orderID string) order.Status {
	s.t.Helper()
	o, err := s.Stores.Orders.Get(context.Background(), orderID)
	require.NoError(s.t, err)
	return o.Status()
}

func (s *shop) couponStatus(user, couponID string) coupon.Status {
	s.t.Helper()
	held, err := s.Stores.UserCoupons.Get(context.Background(), user, couponID)
	require.NoError(s.t, err)
	return held.Status()
}

// state is everything a payment of user's order of productID could change: the balance and
// its ledger, the stock and its history, the user's coupon of couponID ("" for none), the
// order, the outbox.
func (s *shop) state(user, productID, couponID, orderID string) string {
	s.t.Helper()
	ctx := context.Background()
	a, err := s.Stores.Wallets.Get(ctx, user)
	require.NoError(s.t, err)
	sum, entries, err := s.Stores.Wallets.Totals(ctx, user)
	require.NoError(s.t, err)
	_, stock, err := s.Stores.Products.Get(ctx, productID)
	require.NoError(s.t, err)
	movements, err := s.Stores.Stock.Movements(ctx, productID)
	require.NoError(s.t, err)
	heldCoupon := "none"
	if couponID != "" {
		held, err := s.Stores.UserCoupons.Get(ctx, user, couponID)
		require.NoError(s.t, err)
		heldCoupon = fmt.Sprintf("%s %v", held.Status(), held.UsedAt())
	}
	o, err := s.Stores.Orders.Get(ctx, orderID)
	require.NoError(s.t, err)
	messages, err := s.Stores.Outbox.Count(ctx)
	require.NoError(s.t, err)
	return fmt.Sprintf("balance %d, ledger %d over %d; stock %+v, %d movements; coupon %s; order %s %v; outbox %v",
		a.Balance(), sum, entries, stock, len(movements), heldCoupon, o.Status(), o.PaidAt(), messages)
}

// A coupon valid when the order was placed but expired by the time of payment is refused
// INVALID_COUPON, with nothing changed and the idempotency key free again; a coupon one
// microsecond before its expiry still discounts.
func TestPay_RefusesACouponThatExpiredAfterTheOrderWasPlaced(t *testing.T) {
	s := newShop(t)
	p := s.Product(1000, 10)
	s.User("u1", 10_000)
	start := s.FakeClock.Now()
	shortLived := s.holdCoupon("u1", 10, time.Hour)
	longer := s.holdCoupon("u1", 20, 2*time.Hour)
	expiring := s.Order("u1", p, 1, shortLived)
	lasting := s.Order("u1", p, 1, longer)
	require.Equal(t, int64(900), expiring.TotalAmount)
	require.Equal(t, int64(800), lasting.TotalAmount)

	s.FakeClock.Advance(time.Hour) // the coupon is valid strictly before its expiry
	before := s.state("u1", p, shortLived, expiring.OrderID)
	for range 2 { // the refused key was deleted: the retry runs again instead of 409
		_, err := s.pay("u1", expiring.OrderID, "k1")
		require.ErrorIs(t, err, coupon.ErrInvalid)
		assert.Equal(t, before, s.state("u1", p, shortLived, expiring.OrderID), "a refused payment changed state")
	}

	s.FakeClock.Advance(start.Add(2*time.Hour).Sub(s.FakeClock.Now()) - time.Microsecond)
	paid, err := s.pay("u1", lasting.OrderID, "k2")
	require.NoError(t, err)
	assert.Equal(t, int64(800), paid.Value.PaidAmount)
	assert.Equal(t, int64(9200), paid.Value.RemainingBalance)
	assert.Equal(t, coupon.Used, s.couponStatus("u1", longer))

	// The refused order is not stuck: it can be cancelled, and its coupon stays as it is.
	cancelled, err := s.cancel("u1", expiring.OrderID)
	require.NoError(t, err)
	assert.Equal(t, "CANCELLED", cancelled.Status)
	assert.Equal(t, coupon.Available, s.couponStatus("u1", shortLived))
}

// Two PENDING orders name one coupon: the first paid uses it, the second answers
// INVALID_COUPON with nothing changed and can be cancelled, after which paying it is
// ORDER_NOT_PAYABLE. Cancelling an order instead leaves its coupon AVAILABLE for the other.
func TestPay_TwoPendingOrdersOnOneCoupon(t *testing.T) {
	s := newShop(t)
	p := s.Product(1000, 10)
	s.User("u1", 10_000)
	shared := s.holdCoupon("u1", 10, time.Hour)
	first := s.Order("u1", p, 1, shared)
	second := s.Order("u1", p, 2, shared)

	_, err := s.pay("u1", first.OrderID, "first")
	require.NoError(t, err)
	assert.Equal(t, coupon.Used, s.couponStatus("u1", shared))
	before := s.state("u1", p, shared, second.OrderID)
	_, err = s.pay("u1", second.OrderID, "second")
	require.ErrorIs(t, err, coupon.ErrInvalid)
	assert.Equal(t, before, s.state("u1", p, shared, second.OrderID), "a refused payment changed state")

	cancelled, err := s.cancel("u1", second.OrderID)
	require.NoError(t, err)
	want := second
	want.Status = "CANCELLED"
	assert.Equal(t, want, cancelled, "the cancel answers the order, CANCELLED")
	again, err := s.cancel("u1", second.OrderID)
	require.NoError(t, err)
	assert.Equal(t, cancelled, again, "a second cancel answers the same")
	_, err = s.pay("u1", second.OrderID, "second-again")
	require.ErrorIs(t, err, order.ErrNotPayable)
	assert.Equal(t, coupon.Used, s.couponStatus("u1", shared))

	// The other way round: the cancelled order does not take the coupon with it.
	other := s.holdCoupon("u1", 50, time.Hour)
	dropped := s.Order("u1", p, 1, other)
	kept := s.Order("u1", p, 1, other)
	_, err = s.cancel("u1", dropped.OrderID)
	require.NoError(t, err)
	assert.Equal(t, coupon.Available, s.couponStatus("u1", other))
	paid, err := s.pay("u1", kept.OrderID, "kept")
	require.NoError(t, err)
	assert.Equal(t, int64(500), paid.Value.PaidAmount)
}

// Only the owner (or an admin) cancels, only a PENDING order; a paid one is
// ORDER_NOT_CANCELLABLE and stays paid.
func TestCancel_WhoAndWhat(t *testing.T) {
	s := newShop(t)
	p := s.Product(100, 10)
	s.User("u1", 1000)
	pending := s.Order("u1", p, 1, "")

	_, err := s.cancel("intruder", pending.OrderID)
	require.ErrorIs(t, err, order.ErrNotFound, "another user's order is not found, as for Get")
	assert.Equal(t, order.StatusPending, s.status(pending.OrderID))
	_, err = s.cancel("u1", system.UUIDs{}.NewID())
	require.ErrorIs(t, err, order.ErrNotFound)
	_, err = s.cancel("u1", "not-a-uuid")
	require.ErrorIs(t, err, domain.ErrValidation)

	byAdmin, err := s.Orders.Cancel(context.Background(), apporder.CancelCommand{OrderID: pending.OrderID, UserID: "admin", Admin: true})
	require.NoError(t, err)
	assert.Equal(t, "CANCELLED", byAdmin.Status)
	assert.Equal(t, "u1", byAdmin.UserID)

	paid := s.Order("u1", p, 1, "")
	_, err = s.pay("u1", paid.OrderID, "pay")
	require.NoError(t, err)
	_, err = s.cancel("u1", paid.OrderID)
	require.ErrorIs(t, err, order.ErrNotCancellable)
	assert.Equal(t, order.StatusCompleted, s.status(paid.OrderID))
}

// Pairs of a payment and a cancel of one order, all at once: each order ends either paid (the
// cancel refused) or cancelled (the payment refused), and the money, stock, history and outbox
// count exactly the paid ones. The cancels are staggered, so that some come before the
// payments, some while they run and some after; a wave that ends all one way is run again with
// a wider stagger, since the point is to see both.
func TestCancelRacingPayment_EndsInExactlyOne(t *testing.T) {
	s := newShop(t)
	p := s.Product(100, 100_000)
	for _, stagger := range []time.Duration{100 * time.Microsecond, time.Millisecond, 10 * time.Millisecond} {
		paid, cancelled := s.raceWave(t, p, 60, stagger)
		t.Logf("cancels %v apart: %d paid, %d cancelled", stagger, paid, cancelled)
		if paid > 0 && cancelled > 0 {
			return
		}
	}
	t.Fatal("no wave had both a payment and a cancel win")
}

// raceWave places pairs orders of one unit of p (price 100), each by its own user, pays and
// cancels each at once, the i-th cancel i × stagger late, and checks the outcome of every pair
// and the totals.
func (s *shop) raceWave(t *testing.T, p string, pairs int, stagger time.Duration) (paid, cancelled int) {
	const price, balance = 100, 1000
	ctx := context.Background()
	_, stockBefore, err := s.Stores.Products.Get(ctx, p)
	require.NoError(t, err)
	movementsBefore, err := s.Stores.Stock.Movements(ctx, p)
	require.NoError(t, err)
	messagesBefore := s.outboxTotal()

	users, orders := make([]string, pairs), make([]string, pairs)
	for i := range orders {
		users[i] = "racer-" + system.UUIDs{}.NewID()
		s.User(users[i], balance)
		orders[i] = s.Order(users[i], p, 1, "").OrderID
	}
	payErrs, cancelErrs := make([]error, pairs), make([]error, pairs)
	testkit.StartTogether(2*pairs, func(call int) {
		i := call / 2
		if call%2 == 0 {
			_, payErrs[i] = s.pay(users[i], orders[i], "pay")
			return
		}
		time.Sleep(time.Duration(i) * stagger) // the stagger under test, not a wait for something
		_, cancelErrs[i] = s.cancel(users[i], orders[i])
	})

	for i, id := range orders {
		a, err := s.Stores.Wallets.Get(ctx, users[i])
		require.NoError(t, err)
		switch {
		case payErrs[i] == nil && errors.Is(cancelErrs[i], order.ErrNotCancellable):
			paid++
			assert.Equal(t, order.StatusCompleted, s.status(id))
			assert.Equal(t, int64(balance-price), a.Balance(), users[i])
		case cancelErrs[i] == nil && errors.Is(payErrs[i], order.ErrNotPayable):
			cancelled++
			assert.Equal(t, order.StatusCancelled, s.status(id))
			assert.Equal(t, int64(balance), a.Balance(), users[i])
		default:
			t.Fatalf("%s: pay %v, cancel %v", users[i], payErrs[i], cancelErrs[i])
		}
	}
	_, stockAfter, err := s.Stores.Products.Get(ctx, p)
	require.NoError(t, err)
	movementsAfter, err := s.Stores.Stock.Movements(ctx, p)
	require.NoError(t, err)
	assert.Equal(t, stockBefore.Quantity()-int64(paid), stockAfter.Quantity(), "stock")
	assert.Len(t, movementsAfter, len(movementsBefore)+paid, "stock history")
	assert.Equal(t, messagesBefore+paid, s.outboxTotal(), "outbox messages")
	return paid, cancelled
}

// outboxTotal counts the outbox messages of every status.
func (s *shop) outboxTotal() int {
	s.t.Helper()
	counts, err := s.Stores.Outbox.Count(context.Background())
	require.NoError(s.t, err)
	total := 0
	for _, n := range counts {
		total += n
	}
	return total
}

// deadlineOrders is an order repository that records the deadline each read received.
type deadlineOrders struct {
	ports.OrderRepository
	testkit.Deadlines
}

func (d *deadlineOrders) Get(ctx context.Context, id string) (*order.Order, error) {
	d.Record(ctx, "Get")
	return d.OrderRepository.Get(ctx, id)
}

func (d *deadlineOrders) GetForUpdate(ctx context.Context, id string) (*order.Order, error) {
	d.Record(ctx, "GetForUpdate")
	return d.OrderRepository.GetForUpdate(ctx, id)
}

// TestPay_TheOrderReadAndTheTransactionShareOneDatabaseTimeout: a payment reads its order for
// its lock key, then pays in its batch's transaction; both run until one Config.Timeout after the
// payment's arrival (its wait for the lock, none here, aside), not one timeout each.
func TestPay_TheOrderReadAndTheTransactionShareOneDatabaseTimeout(t *testing.T) {
	const timeout = time.Hour // never reached: only the deadlines are read
	s := newShop(t)
	product := s.Product(100, 5)
	s.User("payer", 1000)
	o := s.Order("payer", product, 1, "")
	orders := &deadlineOrders{OrderRepository: s.Stores.Orders}
	svc := payment.NewService(payment.Deps{Tx: s.Stores.Tx, Orders: orders, Products: s.Stores.Products,
		Stock: s.Stores.Stock, Wallets: s.Stores.Wallets, UserCoupons: s.Stores.UserCoupons, Outbox: s.Stores.Outbox,
		Messages: dataplatform.Encoder{}, Guard: s.Guard, Clock: s.Clock, IDs: system.UUIDs{}}, payment.Config{Timeout: timeout})

	before := time.Now()
	if _, err := svc.Pay(context.Background(), payment.PayCommand{OrderID: o.OrderID, UserID: "payer", IdempotencyKey: "k"}); err != nil {
		t.Fatal(err)
	}
	orders.AssertOneTimeoutFromArrival(t, timeout, before, time.Now(), "Get", "GetForUpdate")
}
