package coupon_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/memory/memorytest"
	"github.com/rushgate/rushgate/adapters/system"
	appcoupon "github.com/rushgate/rushgate/application/coupon"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/guard/guardtest"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce/coupon"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

// fixture is a coupon service on memory (memorytest.Env), with the repositories it was given.
type fixture struct {
	*memorytest.Env
	coupons     ports.CouponRepository
	userCoupons ports.UserCouponRepository
	svc         *appcoupon.Service
}

// options are what a test changes of the fixture: wrappers of its repositories and of the
// guard's idempotency store.
type options struct {
	coupons     func(ports.CouponRepository) ports.CouponRepository
	userCoupons func(ports.UserCouponRepository) ports.UserCouponRepository
	idempotency func(ports.IdempotencyStore) ports.IdempotencyStore
}

type option func(*options)

// withCoupons replaces the coupon repository the service uses.
func withCoupons(wrap func(ports.CouponRepository) ports.CouponRepository) option {
	return func(o *options) { o.coupons = wrap }
}

// withUserCoupons replaces the user coupon repository the service uses.
func withUserCoupons(wrap func(ports.UserCouponRepository) ports.UserCouponRepository) option {
	return func(o *options) { o.userCoupons = wrap }
}

// withIdempotency replaces the idempotency store the guard uses.
func withIdempotency(wrap func(ports.IdempotencyStore) ports.IdempotencyStore) option {
	return func(o *options) { o.idempotency = wrap }
}

func newFixture(t *testing.T, opts ...option) *fixture {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	// Backoff really waits (and briefly), so contention does not move the clock coupons expire by.
	envOpts := []memorytest.Option{memorytest.WithClock(memory.NewClock(memorytest.Start), system.Sleeper{}),
		memorytest.WithGuard(guard.Config{BaseDelay: time.Millisecond, MaxRetries: 3})}
	if o.idempotency != nil {
		envOpts = append(envOpts, memorytest.WithIdempotency(o.idempotency))
	}
	env := memorytest.New(envOpts...)
	f := &fixture{Env: env, coupons: env.Stores.Coupons, userCoupons: env.Stores.UserCoupons}
	if o.coupons != nil {
		f.coupons = o.coupons(f.coupons)
	}
	if o.userCoupons != nil {
		f.userCoupons = o.userCoupons(f.userCoupons)
	}
	f.svc = appcoupon.NewService(appcoupon.Deps{Tx: env.Stores.Tx, Coupons: f.coupons, UserCoupons: f.userCoupons,
		Guard: env.Guard, Clock: env.Clock, IDs: system.UUIDs{}}, appcoupon.Config{})
	return f
}

func (f *fixture) create(t *testing.T, total int) appcoupon.View {
	t.Helper()
	v, err := f.svc.Create(context.Background(), appcoupon.CreateCommand{Name: "10% off", DiscountRate: 10,
		TotalQuantity: total, ExpiresAt: f.FakeClock.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (f *fixture) issue(couponID, userID string) (guard.Result[appcoupon.IssueResult], error) {
	return f.svc.Issue(context.Background(), appcoupon.IssueCommand{CouponID: couponID, UserID: userID})
}

// assertIssued checks the coupon's invariant: issued == count(user coupons) == want.
func (f *fixture) assertIssued(t *testing.T, couponID string, want int) {
	t.Helper()
	c, err := f.coupons.Get(context.Background(), couponID)
	if err != nil {
		t.Fatal(err)
	}
	n, err := f.userCoupons.Count(context.Background(), couponID)
	if err != nil {
		t.Fatal(err)
	}
	if c.IssuedQuantity() != want || n != want {
		t.Fatalf("issued %d, user coupons %d, want %d", c.IssuedQuantity(), n, want)
	}
}

// issued is the code of a successful issue in stampede's counts.
const issued = ""

func TestCreate_ValidatesInput(t *testing.T) {
	f := newFixture(t)
	future := f.FakeClock.Now().Add(time.Hour)
	for _, cmd := range []appcoupon.CreateCommand{
		{Name: "", DiscountRate: 10, TotalQuantity: 1, ExpiresAt: future},
		{Name: "x", DiscountRate: 0, TotalQuantity: 1, ExpiresAt: future},
		{Name: "x", DiscountRate: 101, TotalQuantity: 1, ExpiresAt: future},
		{Name: "x", DiscountRate: 10, TotalQuantity: 0, ExpiresAt: future},
		{Name: "x", DiscountRate: 10, TotalQuantity: coupon.MaxTotalQuantity + 1, ExpiresAt: future},
		{Name: "x", DiscountRate: 10, TotalQuantity: 1, ExpiresAt: f.FakeClock.Now()},
	} {
		if _, err := f.svc.Create(context.Background(), cmd); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("%+v: %v", cmd, err)
		}
	}
}

func TestIssue_GivesOneCouponAndCountsDown(t *testing.T) {
	f := newFixture(t)
	c := f.create(t, 2)
	res, err := f.issue(c.ID, "alice")
	if err != nil || res.Outcome != guard.OutcomeCreated || res.Value.UserCouponID == "" {
		t.Fatalf("issue: %+v, %v", res, err)
	}
	want := appcoupon.IssueResult{UserCouponID: res.Value.UserCouponID, CouponName: "10% off", DiscountRate: 10,
		ExpiresAt: c.ExpiresAt, RemainingQuantity: 1}
	if res.Value != want {
		t.Fatalf("got %+v, want %+v", res.Value, want)
	}
	if _, err := f.issue(c.ID, "alice"); !errors.Is(err, coupon.ErrAlreadyIssued) {
		t.Fatalf("twice: %v", err)
	}
	if res, err := f.issue(c.ID, "bob"); err != nil || res.Value.RemainingQuantity != 0 {
		t.Fatalf("bob: %+v, %v", res, err)
	}
	if _, err := f.issue(c.ID, "carol"); !errors.Is(err, coupon.ErrSoldOut) {
		t.Fatalf("carol: %v", err)
	}
	if _, err := f.issue(c.ID, "alice"); !errors.Is(err, coupon.ErrAlreadyIssued) {
		t.Fatalf("alice after sell-out: %v", err)
	}
	f.assertIssued(t, c.ID, 2)
	held, err := f.userCoupons.Get(context.Background(), "alice", c.ID)
	if err != nil || held.Status() != coupon.Available || held.CheckUsable(f.FakeClock.Now()) != nil {
		t.Fatalf("alice holds %+v, %v", held, err)
	}
}

func TestIssue_UnknownExpiredAndMalformedCoupons(t *testing.T) {
	f := newFixture(t)
	if _, err := f.issue("00000000-0000-7000-8000-000000000000", "alice"); !errors.Is(err, coupon.ErrNotFound) {
		t.Errorf("unknown: %v", err)
	}
	if _, err := f.issue("not-a-uuid", "alice"); !errors.Is(err, domain.ErrValidation) {
		t.Errorf("malformed: %v", err)
	}
	c := f.create(t, 5)
	f.FakeClock.Advance(time.Hour)
	if _, err := f.issue(c.ID, "alice"); !errors.Is(err, coupon.ErrExpired) {
		t.Errorf("expired: %v", err)
	}
	f.assertIssued(t, c.ID, 0)
}

func TestIssue_AKeyedIssueIsReplayed(t *testing.T) {
	f := newFixture(t)
	c := f.create(t, 5)
	cmd := appcoupon.IssueCommand{CouponID: c.ID, UserID: "alice", IdempotencyKey: "click"}
	first, err := f.svc.Issue(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.svc.Issue(context.Background(), cmd)
	if err != nil || !again.Replayed || again.Value != first.Value {
		t.Fatalf("replay: %+v, %v", again, err)
	}
	f.assertIssued(t, c.ID, 1)
}

// The coupon and its idempotency marker commit together: a retry whose record the store lost
// (its Complete lost to a Redis blip, the lease over; or Redis restarted empty) replays the
// first 201 from the database, not ALREADY_ISSUED — also when that issue took the last coupon,
// which an instance otherwise answers without the lock.
func TestIssue_AKeyedRetryAfterALostCompleteIsAnsweredFromTheDatabase(t *testing.T) {
	for name, quantity := range map[string]int{"coupons left": 5, "the last coupon": 1} {
		t.Run(name, func(t *testing.T) {
			var store *guardtest.LostCompletes
			f := newFixture(t, withIdempotency(func(inner ports.IdempotencyStore) ports.IdempotencyStore {
				store = &guardtest.LostCompletes{IdempotencyStore: inner}
				return store
			}))
			c := f.create(t, quantity)
			cmd := appcoupon.IssueCommand{CouponID: c.ID, UserID: "alice", IdempotencyKey: "lost"}
			first, err := f.svc.Issue(context.Background(), cmd)
			// The guard retries a lost Complete in the background, so more than one may be lost
			// by now.
			if err != nil || store.Lost() < 1 {
				t.Fatalf("first: %+v, %v, %d lost", first, err, store.Lost())
			}
			f.FakeClock.Advance(31 * time.Second) // the lease of the never-completed record ends
			again, err := f.svc.Issue(context.Background(), cmd)
			if err != nil || !again.Replayed || again.Value != first.Value {
				t.Fatalf("retry: %+v, %v; want the replay of %+v", again, err, first.Value)
			}
			f.assertIssued(t, c.ID, 1)
		})
	}
}

// stampede fires the issues of users at once and counts the answers by code.
func stampede(f *fixture, couponID string, users []string) map[string]int {
	var (
		mu       sync.Mutex
		outcomes = map[string]int{}
	)
	testkit.StartTogether(len(users), func(i int) {
		_, err := f.issue(couponID, users[i])
		mu.Lock()
		outcomes[guardtest.Code(err)]++
		mu.Unlock()
	})
	return outcomes
}

func TestIssue_StampedeOfDistinctUsersIssuesExactlyTheQuantity(t *testing.T) {
	f := newFixture(t)
	c := f.create(t, 100)
	users := make([]string, 1000)
	for i := range users {
		users[i] = fmt.Sprintf("u%d", i)
	}
	outcomes := stampede(f, c.ID, users)
	if outcomes[issued] != 100 || outcomes["COUPON_SOLD_OUT"] != 900 {
		t.Fatalf("outcomes %v", outcomes)
	}
	f.assertIssued(t, c.ID, 100)
}

func TestIssue_OneUserFiringFiftyGetsOne(t *testing.T) {
	f := newFixture(t)
	c := f.create(t, 10)
	users := make([]string, 50)
	for i := range users {
		users[i] = "clicker"
	}
	outcomes := stampede(f, c.ID, users)
	if outcomes[issued] != 1 || outcomes["ALREADY_ISSUED"] != 49 {
		t.Fatalf("outcomes %v", outcomes)
	}
	f.assertIssued(t, c.ID, 1)
}

// rivalCoupons stands for another instance issuing the coupon between this one's read and its
// optimistic write, the first `rivals` times: each AddIssued is preceded by a committed write
// that moves the version on.
type rivalCoupons struct {
	ports.CouponRepository
	rivals int32
	calls  atomic.Int32
}

func (r *rivalCoupons) AddIssued(ctx context.Context, id string, version int64, n int) error {
	if r.calls.Add(1) <= r.rivals {
		// Outside this transaction, as another instance's would be.
		if err := r.CouponRepository.AddIssued(context.WithoutCancel(context.Background()), id, version, 0); err != nil {
			return err
		}
	}
	return r.CouponRepository.AddIssued(ctx, id, version, n)
}

func TestIssue_AVersionConflictIsRetriedThenRefusedWithIssueFailed(t *testing.T) {
	for _, tc := range []struct {
		rivals int32
		code   string
		issued int
	}{
		{appcoupon.DefaultIssueRetries, issued, 1},
		{appcoupon.DefaultIssueRetries + 1, "COUPON_ISSUE_FAILED", 0},
	} {
		t.Run(fmt.Sprintf("%d conflicts", tc.rivals), func(t *testing.T) {
			rival := &rivalCoupons{rivals: tc.rivals}
			f := newFixture(t, withCoupons(func(inner ports.CouponRepository) ports.CouponRepository {
				rival.CouponRepository = inner
				return rival
			}))
			c := f.create(t, 5)
			if _, err := f.issue(c.ID, "alice"); guardtest.Code(err) != tc.code {
				t.Fatalf("issue: %v, want %s", err, tc.code)
			}
			if got := rival.calls.Load(); got != min(tc.rivals+1, appcoupon.DefaultIssueRetries+1) {
				t.Fatalf("%d attempts", got)
			}
			f.assertIssued(t, c.ID, tc.issued)
		})
	}
}

// blindUserCoupons never sees a holder, so only the UNIQUE index can stop a second coupon.
type blindUserCoupons struct{ ports.UserCouponRepository }

func (blindUserCoupons) Existing(context.Context, string, []string) (map[string]bool, error) {
	return map[string]bool{}, nil
}

// A duplicate the holder read missed fails the INSERT: the increment rolls back with it, the
// batch re-runs one by one, and the holder hears ALREADY_ISSUED while the others are issued.
func TestIssue_TheUniqueIndexDecidesAndTheIssuedCountIsRestored(t *testing.T) {
	f := newFixture(t, withUserCoupons(func(inner ports.UserCouponRepository) ports.UserCouponRepository {
		return blindUserCoupons{inner}
	}))
	c := f.create(t, 10)
	if _, err := f.issue(c.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.issue(c.ID, "alice"); !errors.Is(err, coupon.ErrAlreadyIssued) {
		t.Fatalf("again: %v", err)
	}
	f.assertIssued(t, c.ID, 1)
	outcomes := stampede(f, c.ID, []string{"alice", "bob", "carol", "alice"})
	if outcomes[issued] != 2 || outcomes["ALREADY_ISSUED"] != 2 {
		t.Fatalf("outcomes %v", outcomes)
	}
	f.assertIssued(t, c.ID, 3)
}

// Once this instance saw the coupon sold out, the rest of the herd hears so without queueing
// for the lock: here the lock is held elsewhere, and the answer still comes at once.
func TestIssue_OnceSeenSoldOutAnswersWithoutTheLock(t *testing.T) {
	f := newFixture(t)
	c := f.create(t, 1)
	if _, err := f.issue(c.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	// The lane answers alice before it releases the lock, so the lock may still be its own here.
	testkit.Eventually(t, 5*time.Second, "take the coupon's lock after alice's issue", func() error {
		_, err := f.Coord.Locker.TryAcquire(context.Background(), "coupon:"+c.ID, time.Hour)
		return err
	})
	if _, err := f.issue(c.ID, "bob"); !errors.Is(err, coupon.ErrSoldOut) {
		t.Fatalf("bob: %v", err)
	}
	if _, err := f.issue(c.ID, "alice"); !errors.Is(err, coupon.ErrAlreadyIssued) {
		t.Fatalf("alice: %v", err)
	}
}
