package payment_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/dataplatform"
	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/system"
	appcatalog "github.com/rushgate/rushgate/application/catalog"
	"github.com/rushgate/rushgate/application/guard"
	apporder "github.com/rushgate/rushgate/application/order"
	"github.com/rushgate/rushgate/application/payment"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce/coupon"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/domain/commerce/wallet"
	"github.com/rushgate/rushgate/ports"
)

// shop is the order and payment use cases on one in-memory database, with a clock the test
// moves.
type shop struct {
	t        *testing.T
	stores   ports.Stores
	clock    *memory.Clock
	products *appcatalog.Service
	orders   *apporder.Service
	payments *payment.Service
}

func newShop(t *testing.T) *shop {
	t.Helper()
	clock := memory.NewClock(time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC))
	stores := memory.NewStores(memory.NewDatabase())
	coord := memory.NewCoordination(clock)
	g := guard.New(guard.Deps{Idempotency: coord.Idempotency, Locker: coord.Locker, Clock: clock,
		Sleeper: memory.NewSleeper(clock), Tx: stores.Tx, Markers: stores.Markers}, guard.Config{})
	return &shop{
		t: t, stores: stores, clock: clock,
		products: appcatalog.NewService(appcatalog.Deps{Products: stores.Products, Clock: clock, IDs: system.UUIDs{}}),
		orders: apporder.NewService(apporder.Deps{Tx: stores.Tx, Products: stores.Products, Carts: stores.Carts,
			Orders: stores.Orders, UserCoupons: stores.UserCoupons, Guard: g, Clock: clock, IDs: system.UUIDs{}}),
		payments: payment.NewService(payment.Deps{Tx: stores.Tx, Orders: stores.Orders, Products: stores.Products,
			Stock: stores.Stock, Wallets: stores.Wallets, UserCoupons: stores.UserCoupons, Outbox: stores.Outbox,
			Messages: dataplatform.Encoder{}, Guard: g, Clock: clock, IDs: system.UUIDs{}}, payment.Config{}),
	}
}

func (s *shop) product(price, stock int64) string {
	s.t.Helper()
	v, err := s.products.Create(context.Background(), appcatalog.CreateCommand{Name: "item", Price: price, Stock: stock})
	require.NoError(s.t, err)
	return v.ID
}

func (s *shop) user(id string, balance int64) {
	s.t.Helper()
	a, opening, err := wallet.Open(id, balance, system.UUIDs{}.NewID(), s.clock.Now())
	require.NoError(s.t, err)
	require.NoError(s.t, s.stores.Tx.InTx(context.Background(), func(ctx context.Context) error {
		return s.stores.Wallets.Create(ctx, a, opening)
	}))
}

// holdCoupon stores a coupon of rate% expiring after ttl and issues it to user.
func (s *shop) holdCoupon(user string, rate int, ttl time.Duration) string {
	s.t.Helper()
	ctx := context.Background()
	c, err := coupon.New(system.UUIDs{}.NewID(), "sale", rate, 10, s.clock.Now().Add(ttl), s.clock.Now())
	require.NoError(s.t, err)
	require.NoError(s.t, s.stores.Coupons.Create(ctx, c))
	require.NoError(s.t, s.stores.UserCoupons.Add(ctx, c.Issue(system.UUIDs{}.NewID(), user, s.clock.Now())))
	return c.ID()
}

// place orders quantity units of product as user, naming couponID unless it is "".
func (s *shop) place(user, productID string, quantity int, couponID string) apporder.View {
	s.t.Helper()
	ctx := context.Background()
	_, err := s.orders.AddToCart(ctx, apporder.AddToCartCommand{UserID: user, ProductID: productID, Quantity: quantity})
	require.NoError(s.t, err)
	cmd := apporder.PlaceCommand{UserID: user}
	if couponID != "" {
		cmd.CouponID = &couponID
	}
	placed, err := s.orders.Place(ctx, cmd)
	require.NoError(s.t, err)
	return placed.Value
}

func (s *shop) pay(user, orderID, key string) (guard.Result[payment.Result], error) {
	return s.payments.Pay(context.Background(), payment.PayCommand{OrderID: orderID, UserID: user, IdempotencyKey: key})
}

func (s *shop) cancel(user, orderID string) (apporder.View, error) {
	return s.orders.Cancel(context.Background(), apporder.CancelCommand{OrderID: orderID, UserID: user})
}

func (s *shop) status(orderID string) order.Status {
	s.t.Helper()
	o, err := s.stores.Orders.Get(context.Background(), orderID)
	require.NoError(s.t, err)
	return o.Status()
}

func (s *shop) couponStatus(user, couponID string) coupon.Status {
	s.t.Helper()
	held, err := s.stores.UserCoupons.Get(context.Background(), user, couponID)
	require.NoError(s.t, err)
	return held.Status()
}

// state is everything a payment of user's order of productID could change: the balance and
// its ledger, the stock and its history, the user's coupon of couponID, the order, the outbox.
func (s *shop) state(user, productID, couponID, orderID string) string {
	s.t.Helper()
	ctx := context.Background()
	a, err := s.stores.Wallets.Get(ctx, user)
	require.NoError(s.t, err)
	sum, entries, err := s.stores.Wallets.Totals(ctx, user)
	require.NoError(s.t, err)
	_, stock, err := s.stores.Products.Get(ctx, productID)
	require.NoError(s.t, err)
	movements, err := s.stores.Stock.Movements(ctx, productID)
	require.NoError(s.t, err)
	held, err := s.stores.UserCoupons.Get(ctx, user, couponID)
	require.NoError(s.t, err)
	o, err := s.stores.Orders.Get(ctx, orderID)
	require.NoError(s.t, err)
	messages, err := s.stores.Outbox.Count(ctx)
	require.NoError(s.t, err)
	return fmt.Sprintf("balance %d, ledger %d over %d; stock %+v, %d movements; coupon %s %v; order %s %v; outbox %v",
		a.Balance(), sum, entries, stock, len(movements), held.Status(), held.UsedAt(), o.Status(), o.PaidAt(), messages)
}

// A coupon valid when the order was placed but expired by the time of payment is refused
// INVALID_COUPON, with nothing changed and the idempotency key free again; a coupon one
// microsecond before its expiry still discounts.
func TestPay_RefusesACouponThatExpiredAfterTheOrderWasPlaced(t *testing.T) {
	s := newShop(t)
	p := s.product(1000, 10)
	s.user("u1", 10_000)
	start := s.clock.Now()
	shortLived := s.holdCoupon("u1", 10, time.Hour)
	longer := s.holdCoupon("u1", 20, 2*time.Hour)
	expiring := s.place("u1", p, 1, shortLived)
	lasting := s.place("u1", p, 1, longer)
	require.Equal(t, int64(900), expiring.TotalAmount)
	require.Equal(t, int64(800), lasting.TotalAmount)

	s.clock.Advance(time.Hour) // the coupon is valid strictly before its expiry
	before := s.state("u1", p, shortLived, expiring.OrderID)
	for range 2 { // the refused key was deleted: the retry runs again instead of 409
		_, err := s.pay("u1", expiring.OrderID, "k1")
		require.ErrorIs(t, err, coupon.ErrInvalid)
		assert.Equal(t, before, s.state("u1", p, shortLived, expiring.OrderID), "a refused payment changed state")
	}

	s.clock.Advance(start.Add(2*time.Hour).Sub(s.clock.Now()) - time.Microsecond)
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
	p := s.product(1000, 10)
	s.user("u1", 10_000)
	shared := s.holdCoupon("u1", 10, time.Hour)
	first := s.place("u1", p, 1, shared)
	second := s.place("u1", p, 2, shared)

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
	dropped := s.place("u1", p, 1, other)
	kept := s.place("u1", p, 1, other)
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
	p := s.product(100, 10)
	s.user("u1", 1000)
	pending := s.place("u1", p, 1, "")

	_, err := s.cancel("intruder", pending.OrderID)
	require.ErrorIs(t, err, order.ErrNotFound, "another user's order is not found, as for Get")
	assert.Equal(t, order.StatusPending, s.status(pending.OrderID))
	_, err = s.cancel("u1", system.UUIDs{}.NewID())
	require.ErrorIs(t, err, order.ErrNotFound)
	_, err = s.cancel("u1", "not-a-uuid")
	require.ErrorIs(t, err, domain.ErrValidation)

	byAdmin, err := s.orders.Cancel(context.Background(), apporder.CancelCommand{OrderID: pending.OrderID, UserID: "admin", Admin: true})
	require.NoError(t, err)
	assert.Equal(t, "CANCELLED", byAdmin.Status)
	assert.Equal(t, "u1", byAdmin.UserID)

	paid := s.place("u1", p, 1, "")
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
	p := s.product(100, 100_000)
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
	_, stockBefore, err := s.stores.Products.Get(ctx, p)
	require.NoError(t, err)
	movementsBefore, err := s.stores.Stock.Movements(ctx, p)
	require.NoError(t, err)
	messagesBefore := s.outboxTotal()

	users, orders := make([]string, pairs), make([]string, pairs)
	for i := range orders {
		users[i] = "racer-" + system.UUIDs{}.NewID()
		s.user(users[i], balance)
		orders[i] = s.place(users[i], p, 1, "").OrderID
	}
	payErrs, cancelErrs := make([]error, pairs), make([]error, pairs)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range pairs {
		wg.Go(func() { <-start; _, payErrs[i] = s.pay(users[i], orders[i], "pay") })
		wg.Go(func() {
			<-start
			time.Sleep(time.Duration(i) * stagger)
			_, cancelErrs[i] = s.cancel(users[i], orders[i])
		})
	}
	close(start)
	wg.Wait()

	for i, id := range orders {
		a, err := s.stores.Wallets.Get(ctx, users[i])
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
	_, stockAfter, err := s.stores.Products.Get(ctx, p)
	require.NoError(t, err)
	movementsAfter, err := s.stores.Stock.Movements(ctx, p)
	require.NoError(t, err)
	assert.Equal(t, stockBefore.Quantity()-int64(paid), stockAfter.Quantity(), "stock")
	assert.Len(t, movementsAfter, len(movementsBefore)+paid, "stock history")
	assert.Equal(t, messagesBefore+paid, s.outboxTotal(), "outbox messages")
	return paid, cancelled
}

// outboxTotal counts the outbox messages of every status.
func (s *shop) outboxTotal() int {
	s.t.Helper()
	counts, err := s.stores.Outbox.Count(context.Background())
	require.NoError(s.t, err)
	total := 0
	for _, n := range counts {
		total += n
	}
	return total
}
