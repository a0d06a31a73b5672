package order_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/memory/memorytest"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/application/guard/guardtest"
	apporder "github.com/rushgate/rushgate/application/order"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce"
	"github.com/rushgate/rushgate/domain/commerce/catalog"
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

func (s *shop) add(user, productID string, quantity int) (apporder.CartItemView, error) {
	return s.Orders.AddToCart(context.Background(), apporder.AddToCartCommand{UserID: user, ProductID: productID, Quantity: quantity})
}

func (s *shop) place(user string, couponID *string) (apporder.View, error) {
	res, err := s.Orders.Place(context.Background(), apporder.PlaceCommand{UserID: user, CouponID: couponID})
	return res.Value, err
}

func (s *shop) cart(user string) apporder.CartView {
	s.t.Helper()
	c, err := s.Orders.Cart(context.Background(), user)
	require.NoError(s.t, err)
	return c
}

func TestPlace_AppliesAHeldCouponRoundingTheDiscountDown(t *testing.T) {
	s := newShop(t)
	p, q := s.Product(999, 10), s.Product(5001, 10)
	_, err := s.add("u1", p, 3)
	require.NoError(t, err)
	_, err = s.add("u1", q, 1)
	require.NoError(t, err)
	couponID, _ := s.HoldCoupon("u1", 15, time.Hour)

	placed, err := s.place("u1", &couponID)
	require.NoError(t, err)
	// 3 × 999 + 5001 = 7998; 15% = 1199.7, rounded down.
	assert.Equal(t, int64(7998), placed.SubtotalAmount)
	assert.Equal(t, int64(1199), placed.DiscountAmount)
	assert.Equal(t, int64(6799), placed.TotalAmount)
	assert.Equal(t, &couponID, placed.CouponID)
	assert.Equal(t, "PENDING", placed.Status)
	assert.Nil(t, placed.PaidAt)
	assert.Empty(t, s.cart("u1").Items)

	got, err := s.Orders.Get(context.Background(), apporder.GetQuery{OrderID: placed.OrderID, UserID: "u1"})
	require.NoError(t, err)
	assert.Equal(t, placed, got)
}

func TestPlace_RefusesACouponTheUserCannotUseAndKeepsTheCart(t *testing.T) {
	s := newShop(t)
	p := s.Product(1000, 10)
	_, err := s.add("u1", p, 2)
	require.NoError(t, err)
	expired, _ := s.HoldCoupon("u1", 10, time.Minute)
	used, usedUC := s.HoldCoupon("u1", 10, time.Hour)
	require.NoError(t, s.Stores.UserCoupons.MarkUsed(context.Background(), usedUC, s.FakeClock.Now()))
	othersCoupon, _ := s.HoldCoupon("u2", 10, time.Hour)
	unknown := system.UUIDs{}.NewID()
	s.FakeClock.Advance(time.Minute) // expired is valid strictly before its expiry

	for name, id := range map[string]string{"expired": expired, "used": used, "not held": othersCoupon, "unknown": unknown} {
		_, err := s.place("u1", &id)
		assert.ErrorIs(t, err, coupon.ErrInvalid, name)
	}
	before := s.cart("u1")
	assert.Len(t, before.Items, 1, "a refused order keeps the cart")
	_, err = s.place("u1", nil)
	require.NoError(t, err, "the same cart orders without a coupon")
}

func TestPlace_EmptyCartIsRefusedBeforeTheCoupon(t *testing.T) {
	s := newShop(t)
	unknown := system.UUIDs{}.NewID()
	_, err := s.place("never-added", &unknown)
	assert.ErrorIs(t, err, order.ErrEmptyCart)
	_, err = s.place("never-added", nil)
	assert.ErrorIs(t, err, order.ErrEmptyCart)
}

func TestPlace_MalformedCouponIDIsAValidationError(t *testing.T) {
	s := newShop(t)
	bad := "C001"
	_, err := s.place("u1", &bad)
	de, ok := domain.AsError(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, domain.CodeValidationFailed, de.Code)
	assert.Equal(t, "couponId", de.Details["field"])
}

func TestPlace_WithAKeyReplaysInsteadOfPlacingAgain(t *testing.T) {
	s := newShop(t)
	p := s.Product(100, 10)
	_, err := s.add("u1", p, 1)
	require.NoError(t, err)
	cmd := apporder.PlaceCommand{UserID: "u1", IdempotencyKey: "k1"}
	first, err := s.Orders.Place(context.Background(), cmd)
	require.NoError(t, err)
	assert.False(t, first.Replayed)
	again, err := s.Orders.Place(context.Background(), cmd)
	require.NoError(t, err)
	assert.True(t, again.Replayed)
	assert.Equal(t, first.Value.OrderID, again.Value.OrderID)
	cmd.IdempotencyKey = "k2"
	_, err = s.Orders.Place(context.Background(), cmd)
	assert.ErrorIs(t, err, order.ErrEmptyCart)
}

// The order and its idempotency marker commit together: a retry whose record the store lost (a
// Complete lost to a Redis blip, the lease over; or Redis restarted empty) is answered with the
// first order from the database, not placed again from what the cart holds by then.
func TestPlace_ARetryAfterALostCompleteReplaysTheOrderFromTheDatabase(t *testing.T) {
	clock := memory.NewClock(memorytest.Start)
	var store *guardtest.LostCompletes
	s := &shop{Shop: memorytest.NewShop(t, memorytest.WithClock(clock, system.Sleeper{}),
		memorytest.WithIdempotency(func(inner ports.IdempotencyStore) ports.IdempotencyStore {
			store = &guardtest.LostCompletes{IdempotencyStore: inner}
			return store
		})), t: t}
	p := s.Product(100, 10)
	_, err := s.add("u1", p, 1)
	require.NoError(t, err)
	cmd := apporder.PlaceCommand{UserID: "u1", IdempotencyKey: "lost"}
	first, err := s.Orders.Place(context.Background(), cmd)
	require.NoError(t, err)
	// The guard retries a lost Complete in the background, so more than one may be lost by now.
	require.GreaterOrEqual(t, store.Lost(), 1)
	clock.Advance(31 * time.Second) // the lease of the never-completed record ends
	_, err = s.add("u1", p, 2)      // the cart is filled again meanwhile
	require.NoError(t, err)

	again, err := s.Orders.Place(context.Background(), cmd)
	require.NoError(t, err)
	assert.True(t, again.Replayed)
	assert.Equal(t, first.Value, again.Value)
	assert.Len(t, s.cart("u1").Items, 1, "the retry must not take the new cart")
}

func TestAddToCart_RefusesWhatTheStockOrTheLimitsDoNotCover(t *testing.T) {
	s := newShop(t)
	p := s.Product(100, 1000)
	_, err := s.add("u1", p, 999)
	require.NoError(t, err)
	_, err = s.add("u1", p, 2)
	assert.ErrorIs(t, err, domain.ErrValidation, "a line holds at most 1000 units")

	scarce := s.Product(100, 3)
	_, err = s.add("u1", scarce, 4)
	assert.ErrorIs(t, err, catalog.ErrInsufficientStock)
	_, err = s.add("u1", system.UUIDs{}.NewID(), 1)
	assert.ErrorIs(t, err, catalog.ErrProductNotFound)

	dear := s.Product(commerce.MaxAmount, 10)
	_, err = s.add("u1", dear, 1)
	assert.ErrorIs(t, err, commerce.ErrAmountOverflow, "the cart's total would leave the range of amounts")

	c := s.cart("u1")
	require.Len(t, c.Items, 1)
	assert.Equal(t, 999, c.Items[0].Quantity)
}

// TestAddToCart_ConcurrentAddsWhileOrderingLoseNothing races adds against orders of one cart:
// every unit added ends up either in exactly one order or still in the cart.
func TestAddToCart_ConcurrentAddsWhileOrderingLoseNothing(t *testing.T) {
	s := newShop(t)
	p := s.Product(10, 100000)
	const adds, orders = 200, 20
	placed := make(chan apporder.View, orders)
	testkit.StartTogether(adds+orders, func(i int) {
		if i < adds {
			_, err := s.add("u1", p, 1)
			assert.NoError(t, err)
			return
		}
		v, err := s.place("u1", nil)
		if err == nil {
			placed <- v
			return
		}
		assert.True(t, errors.Is(err, order.ErrEmptyCart), "%v", err)
	})
	close(placed)
	units := 0
	for v := range placed {
		require.Len(t, v.Items, 1)
		units += v.Items[0].Quantity
	}
	if c := s.cart("u1"); len(c.Items) == 1 {
		units += c.Items[0].Quantity
	}
	assert.Equal(t, adds, units)
}

// TestAddToCart_ConcurrentAddsAreAnsweredEachInTurn: 50 adds of one unit race for a stock of
// 30 beside adds of a product that does not exist. However they are batched, each add sees the
// adds before it: the 30 that fit answer the line's totals 1..30, one each, the rest
// INSUFFICIENT_STOCK, and each add of the missing product is refused alone.
func TestAddToCart_ConcurrentAddsAreAnsweredEachInTurn(t *testing.T) {
	s := newShop(t)
	p := s.Product(10, 30)
	missing := system.UUIDs{}.NewID()
	const adds, missingAdds = 50, 5
	quantities := make(chan int, adds)
	var refused, notFound atomic.Int64
	testkit.StartTogether(adds+missingAdds, func(i int) {
		if i >= adds {
			_, err := s.add("u1", missing, 1)
			if assert.ErrorIs(t, err, catalog.ErrProductNotFound) {
				notFound.Add(1)
			}
			return
		}
		v, err := s.add("u1", p, 1)
		if err != nil {
			if assert.ErrorIs(t, err, catalog.ErrInsufficientStock) {
				refused.Add(1)
			}
			return
		}
		quantities <- v.Quantity
	})
	close(quantities)
	var got []int
	for q := range quantities {
		got = append(got, q)
	}
	slices.Sort(got)
	want := make([]int, 30)
	for i := range want {
		want[i] = i + 1
	}
	assert.Equal(t, want, got, "each successful add answers the line's total right after it")
	assert.Equal(t, int64(adds-30), refused.Load())
	assert.Equal(t, int64(missingAdds), notFound.Load())
	c := s.cart("u1")
	require.Len(t, c.Items, 1)
	assert.Equal(t, 30, c.Items[0].Quantity)
}

func TestGet_AnotherUsersOrderIsNotFoundButAnAdminSeesIt(t *testing.T) {
	s := newShop(t)
	p := s.Product(100, 10)
	_, err := s.add("u1", p, 1)
	require.NoError(t, err)
	placed, err := s.place("u1", nil)
	require.NoError(t, err)
	_, err = s.Orders.Get(context.Background(), apporder.GetQuery{OrderID: placed.OrderID, UserID: "u2"})
	assert.ErrorIs(t, err, order.ErrNotFound)
	got, err := s.Orders.Get(context.Background(), apporder.GetQuery{OrderID: placed.OrderID, UserID: "admin", Admin: true})
	require.NoError(t, err)
	assert.Equal(t, placed, got)
}

// deadlineTx is a TxRunner that records the deadline of the context each transaction starts
// with.
type deadlineTx struct {
	ports.TxRunner
	deadlines chan time.Time // zero: started without one
}

func (d deadlineTx) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	deadline, _ := ctx.Deadline()
	d.deadlines <- deadline
	return d.TxRunner.InTx(ctx, fn)
}

// TestAddToCart_TheBatchRunsUntilTheAddsTimeoutFromItsArrival: an add's wait for its batch and
// the batch's transaction are bounded together by AddTimeout from the add's arrival, so adds
// queued behind a slow transaction answer within one timeout.
func TestAddToCart_TheBatchRunsUntilTheAddsTimeoutFromItsArrival(t *testing.T) {
	const timeout = time.Hour // never reached: only the deadline is read
	s := newShop(t)
	product := s.Product(100, 10)
	tx := deadlineTx{TxRunner: s.Stores.Tx, deadlines: make(chan time.Time, 1)}
	orders := apporder.NewService(apporder.Deps{Tx: tx, Products: s.Stores.Products, Carts: s.Stores.Carts,
		Orders: s.Stores.Orders, UserCoupons: s.Stores.UserCoupons, Guard: s.Guard, Clock: s.Clock, IDs: system.UUIDs{},
		AddTimeout: timeout})

	before := time.Now()
	_, err := orders.AddToCart(context.Background(), apporder.AddToCartCommand{UserID: "buyer", ProductID: product, Quantity: 1})
	after := time.Now()
	require.NoError(t, err)
	d := <-tx.deadlines
	assert.False(t, d.Before(before.Add(timeout)) || d.After(after.Add(timeout)),
		"the batch's transaction ran until %v, want the add's arrival (%v–%v) + %v", d, before, after, timeout)
}

// TestAddToCart_ACommitWhoseAnswerWasLostIsAnsweredByTheCartsRecentAdds: an add whose
// transaction's COMMIT outcome is unknown (its connection lost during it) reads whether the cart
// records its batch among its recent adds: when the transaction committed, the client hears its
// line, not a 503 whose retry would add the units a second time, also when another instance's
// add committed on the cart in between and when the add created the cart; when it did not, it
// hears 503, the retry adds the units once, and a cart it would have created answers empty and
// cannot be ordered.
func TestAddToCart_ACommitWhoseAnswerWasLostIsAnsweredByTheCartsRecentAdds(t *testing.T) {
	cases := []struct {
		name string
		// before: units in the cart before the lost add (0: the lost add creates the cart).
		before int
		// between: another instance adds a unit once the lost add's transaction has ended.
		between bool
	}{{name: "cart exists", before: 1}, {name: "another instance adds between", before: 1, between: true},
		{name: "lost add creates the cart"}}
	for _, c := range cases {
		for _, committed := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/committed=%v", c.name, committed), func(t *testing.T) {
				ctx := context.Background()
				s := newShop(t)
				product := s.Product(100, 10)
				if c.before > 0 {
					_, err := s.add("u1", product, c.before)
					require.NoError(t, err)
				}
				runner := testkit.CommitLostTx{Inner: s.Stores.Tx, Committed: committed}
				units := c.before // in the cart before the lost add, the other instance's included
				if c.between {
					runner.Meanwhile = func(context.Context) {
						_, err := s.add("u1", product, 1)
						assert.NoError(t, err, "the other instance's add")
					}
					units++
				}
				lost := apporder.NewService(apporder.Deps{Tx: runner,
					Products: s.Stores.Products, Carts: s.Stores.Carts, Orders: s.Stores.Orders,
					UserCoupons: s.Stores.UserCoupons, Guard: s.Guard, Clock: s.Clock, IDs: system.UUIDs{}})
				add := apporder.AddToCartCommand{UserID: "u1", ProductID: product, Quantity: 2}
				quantity := func() int {
					items := s.cart("u1").Items
					if len(items) == 0 {
						return 0
					}
					return items[0].Quantity
				}

				view, err := lost.AddToCart(ctx, add)

				if !committed {
					require.ErrorIs(t, err, ports.ErrUnavailable, "not committed: answered %+v", view)
					require.ErrorIs(t, err, ports.ErrCommitOutcomeUnknown, "the COMMIT went out as far as the client knows")
					assert.Equal(t, units, quantity(), "nothing added")
					if units == 0 {
						_, err := s.place("u1", nil)
						require.ErrorIs(t, err, order.ErrEmptyCart, "an order of the cart the lost add left")
					}
					retried, err := s.Orders.AddToCart(ctx, add)
					require.NoError(t, err, "the retry")
					assert.Equal(t, units+2, retried.Quantity, "the retry added the units once")
					assert.Equal(t, units+2, quantity())
					return
				}
				require.NoError(t, err, "committed: answered as added")
				assert.Equal(t, c.before+2, view.Quantity, "the line's total the add made")
				assert.Equal(t, product, view.ProductID)
				assert.Equal(t, units+2, quantity(), "the units added once")
			})
		}
	}
}
