package guard_test

//go:generate go tool -modfile=../../tools/go.mod mockgen -destination=mocks_test.go -package=guard_test github.com/rushgate/rushgate/ports Locker,Lock,IdempotencyStore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/mock/gomock"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/guard/guardtest"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

// fixture is one process's guard dependencies on in-memory adapters with fake time:
// memory.Sleeper moves the clock instead of waiting.
type fixture struct {
	clock   *memory.Clock
	sleeper *memory.Sleeper
	store   *checkedStore
	locker  *memory.Locker
	db      *memory.Database
	markers *memory.IdempotencyMarkerRepository
	queues  *guardtest.Queues // the observer of parkedGuard
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clock := memory.NewClock(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	db := memory.NewDatabase()
	return &fixture{
		clock:   clock,
		sleeper: memory.NewSleeper(clock),
		store:   &checkedStore{IdempotencyStore: memory.NewIdempotencyStore(clock), t: t},
		locker:  memory.NewLocker(clock),
		db:      db,
		markers: memory.NewIdempotencyMarkerRepository(db),
		queues:  guardtest.NewQueues(),
	}
}

// deps are the fixture's ports; tests replace one to mock it.
func (f *fixture) deps() guard.Deps {
	return guard.Deps{
		Idempotency: f.store, Locker: f.locker, Clock: f.clock, Sleeper: f.sleeper,
		Tx: f.db, Markers: f.markers,
	}
}

// guard returns a guard on deps without jitter, so delays are exact unless an option says
// otherwise.
func newGuard(deps guard.Deps, cfg guard.Config, opts ...guard.Option) *guard.Guard {
	noJitter := guard.WithJitter(func(time.Duration) time.Duration { return 0 })
	return guard.New(deps, cfg, append([]guard.Option{noJitter}, opts...)...)
}

func (f *fixture) guard(cfg guard.Config, opts ...guard.Option) *guard.Guard {
	return newGuard(f.deps(), cfg, opts...)
}

// checkedStore is the memory IdempotencyStore with two additions: every Complete and Delete must
// get a context the request cannot have cancelled (the memory store itself ignores contexts), and
// Complete can be made to fail after the business write, as a Redis blip would.
type checkedStore struct {
	*memory.IdempotencyStore
	t             *testing.T
	loseCompletes atomic.Bool
}

func (s *checkedStore) Complete(ctx context.Context, key ports.IdempotencyKey, token string, response ports.StoredResponse, ttl time.Duration) error {
	if ctx.Err() != nil {
		s.t.Errorf("Complete(%v) got a done context: %v", key, ctx.Err())
	}
	if s.loseCompletes.Load() {
		return fmt.Errorf("redis blip: %w", ports.ErrUnavailable)
	}
	return s.IdempotencyStore.Complete(ctx, key, token, response, ttl)
}

func (s *checkedStore) Delete(ctx context.Context, key ports.IdempotencyKey, token string) error {
	if ctx.Err() != nil {
		s.t.Errorf("Delete(%v) got a done context: %v", key, ctx.Err())
	}
	return s.IdempotencyStore.Delete(ctx, key, token)
}

const lockKey = "thing:1"

func request(key string) guard.Request {
	return guard.Request{
		UserID:         "u1",
		IdempotencyKey: key,
		Fingerprint:    guard.Fingerprint("thing.do", []string{"1"}, []byte(`{"n":1}`)),
		LockKey:        lockKey,
		Outcome:        guard.OutcomeCreated,
	}
}

type answer struct {
	N int
}

func succeed(calls *int) func(context.Context) (answer, error) {
	return func(context.Context) (answer, error) {
		*calls++
		return answer{N: *calls}, nil
	}
}

var errThingFull = domain.NewError(domain.KindInvalid, "THING_FULL", "full")

// entry is one way into the guard with idempotency: Once, or Lane.Run with a batch function
// that calls fn once per request (fn's error is that request's Answer.Err).
type entry struct {
	name string
	run  func(ctx context.Context, g *guard.Guard, req guard.Request, fn func(context.Context) (answer, error)) (guard.Result[answer], error)
}

func laneEntry(name string, cfg guard.LaneConfig) entry {
	return entry{name: name, run: func(ctx context.Context, g *guard.Guard, req guard.Request, fn func(context.Context) (answer, error)) (guard.Result[answer], error) {
		lane := guard.NewLane(g, cfg, func(ctx context.Context, batch []struct{}) ([]guard.Answer[answer], error) {
			answers := make([]guard.Answer[answer], len(batch))
			for i := range batch {
				answers[i].Value, answers[i].Err = fn(ctx)
			}
			return answers, nil
		})
		return lane.Run(ctx, req, struct{}{})
	}}
}

var (
	onceEntry   = entry{name: "Once", run: guard.Once[answer]}
	laneEntries = []entry{
		laneEntry("Lane.Run", guard.LaneConfig{}),
		laneEntry("Lane.Run with markers", guard.LaneConfig{Markers: true}),
	}
	entries = append([]entry{onceEntry}, laneEntries...)
)

func forEach(t *testing.T, entries []entry, test func(t *testing.T, e entry)) {
	for _, e := range entries {
		t.Run(e.name, func(t *testing.T) { test(t, e) })
	}
}

// assertKeyFree proves the record was deleted: a new Begin starts afresh.
func assertKeyFree(t *testing.T, f *fixture, req guard.Request) {
	t.Helper()
	got, err := f.store.Begin(context.Background(), ports.IdempotencyKey{Scope: req.UserID, Key: req.IdempotencyKey}, req.Fingerprint, time.Minute, time.Hour)
	if err != nil || got.State != ports.BeginStarted {
		t.Fatalf("key %s still taken: state %v, err %v", req.IdempotencyKey, got.State, err)
	}
}

// awaitLockFree proves the lock is released, or is about to be: a batch hands out its answers
// before it releases its lock.
func awaitLockFree(t *testing.T, f *fixture, key string) {
	t.Helper()
	testkit.Eventually(t, patience, "lock "+key+" released", func() error {
		lock, err := f.locker.TryAcquire(context.Background(), key, time.Second)
		if err != nil {
			return err
		}
		return lock.Release(context.Background())
	})
}

// hold takes key as another instance would, for an hour of fake time.
func (f *fixture) hold(t *testing.T, key string) ports.Lock {
	t.Helper()
	lock, err := f.locker.TryAcquire(context.Background(), key, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return lock
}

func TestGuard_FirstRequestRunsAndStoresItsAnswer(t *testing.T) {
	forEach(t, entries, func(t *testing.T, e entry) {
		f := newFixture(t)
		calls := 0
		res, err := e.run(context.Background(), f.guard(guard.Config{}), request("k1"), succeed(&calls))
		if err != nil {
			t.Fatal(err)
		}
		if res.Replayed || res.Outcome != guard.OutcomeCreated || res.Value.N != 1 || calls != 1 {
			t.Fatalf("got %+v after %d calls", res, calls)
		}
		awaitLockFree(t, f, lockKey)
	})
}

func TestGuard_CompletedKeyIsReplayedWithoutRunning(t *testing.T) {
	forEach(t, entries, func(t *testing.T, e entry) {
		f := newFixture(t)
		g := f.guard(guard.Config{})
		calls := 0
		first, _ := e.run(context.Background(), g, request("k1"), succeed(&calls))
		again, err := e.run(context.Background(), g, request("k1"), succeed(&calls))
		if err != nil {
			t.Fatal(err)
		}
		if !again.Replayed || again.Outcome != guard.OutcomeCreated || again.Value != first.Value || calls != 1 {
			t.Fatalf("replay %+v, first %+v, calls %d", again, first, calls)
		}
	})
}

func TestGuard_KeysAreScopedPerUser(t *testing.T) {
	forEach(t, entries, func(t *testing.T, e entry) {
		f := newFixture(t)
		g := f.guard(guard.Config{})
		calls := 0
		other := request("k1")
		other.UserID = "u2"
		if _, err := e.run(context.Background(), g, request("k1"), succeed(&calls)); err != nil {
			t.Fatal(err)
		}
		res, err := e.run(context.Background(), g, other, succeed(&calls))
		if err != nil || res.Replayed || res.Value.N != 2 || calls != 2 {
			t.Fatalf("user u2 saw u1's key: %+v, %v, calls %d", res, err, calls)
		}
	})
}

func TestGuard_ReuseWithAnotherPayloadIsRejected(t *testing.T) {
	forEach(t, entries, func(t *testing.T, e entry) {
		f := newFixture(t)
		g := f.guard(guard.Config{})
		calls := 0
		if _, err := e.run(context.Background(), g, request("k1"), succeed(&calls)); err != nil {
			t.Fatal(err)
		}
		changed := request("k1")
		changed.Fingerprint = guard.Fingerprint("thing.do", []string{"1"}, []byte(`{"n":2}`))
		_, err := e.run(context.Background(), g, changed, succeed(&calls))
		if !errors.Is(err, guard.ErrKeyReused) || calls != 1 {
			t.Fatalf("err %v, calls %d", err, calls)
		}
	})
}

func TestGuard_InProgressKeyIsRejectedUntilItsLeaseEnds(t *testing.T) {
	forEach(t, entries, func(t *testing.T, e entry) {
		f := newFixture(t)
		g := f.guard(guard.Config{Lease: 30 * time.Second})
		req := request("k1")
		// A request that started and then died: its record stays IN_PROGRESS.
		if _, err := f.store.Begin(context.Background(), ports.IdempotencyKey{Scope: "u1", Key: "k1"}, req.Fingerprint, 30*time.Second, time.Hour); err != nil {
			t.Fatal(err)
		}
		calls := 0
		_, err := e.run(context.Background(), g, req, succeed(&calls))
		if !errors.Is(err, guard.ErrInProgress) || calls != 0 {
			t.Fatalf("during lease: err %v, calls %d", err, calls)
		}

		f.clock.Advance(31 * time.Second)
		changed := req
		changed.Fingerprint = guard.Fingerprint("thing.do", []string{"1"}, []byte(`{"n":2}`))
		if _, err := e.run(context.Background(), g, changed, succeed(&calls)); !errors.Is(err, guard.ErrKeyReused) || calls != 0 {
			t.Fatalf("another payload after the lease: err %v, calls %d", err, calls)
		}
		res, err := e.run(context.Background(), g, req, succeed(&calls))
		if err != nil || res.Replayed || calls != 1 {
			t.Fatalf("after lease: %+v, err %v, calls %d", res, err, calls)
		}
	})
}

func TestGuard_BusinessRejectionDeletesKeyAndReleasesLock(t *testing.T) {
	forEach(t, entries, func(t *testing.T, e entry) {
		f := newFixture(t)
		_, err := e.run(context.Background(), f.guard(guard.Config{}), request("k1"), func(context.Context) (answer, error) {
			return answer{}, errThingFull
		})
		if !errors.Is(err, errThingFull) {
			t.Fatalf("err %v", err)
		}
		awaitLockFree(t, f, lockKey)
		assertKeyFree(t, f, request("k1"))
	})
}

func TestGuard_PrecheckRejectsBeforeRunningOrQueueingForTheLock(t *testing.T) {
	forEach(t, entries, func(t *testing.T, e entry) {
		f := newFixture(t)
		// The lock is busy: a request that queued for it would sleep.
		f.hold(t, lockKey)
		req := request("k1")
		req.Precheck = func(context.Context) error { return errThingFull }
		calls := 0
		_, err := e.run(context.Background(), f.guard(guard.Config{}), req, succeed(&calls))
		if !errors.Is(err, errThingFull) || calls != 0 || len(f.sleeper.Waits()) != 0 {
			t.Fatalf("err %v, calls %d, sleeps %v", err, calls, f.sleeper.Waits())
		}
		assertKeyFree(t, f, req)
	})
}

func TestGuard_PrecheckDoesNotHideAReplay(t *testing.T) {
	forEach(t, entries, func(t *testing.T, e entry) {
		f := newFixture(t)
		g := f.guard(guard.Config{})
		calls := 0
		if _, err := e.run(context.Background(), g, request("k1"), succeed(&calls)); err != nil {
			t.Fatal(err)
		}
		req := request("k1")
		req.Precheck = func(context.Context) error { return errThingFull }
		res, err := e.run(context.Background(), g, req, succeed(&calls))
		if err != nil || !res.Replayed || calls != 1 {
			t.Fatalf("%+v, %v, calls %d", res, err, calls)
		}
	})
}

// TestFingerprint_SharedOnlyWhenOperationIdsAndInputAllMatch: the same request has the same
// fingerprint, and no two different ones share it however their parts could run together.
func TestFingerprint_SharedOnlyWhenOperationIdsAndInputAllMatch(t *testing.T) {
	type request struct {
		operation string
		ids       []string
		input     []byte
	}
	requests := map[string]request{
		"join a":             {"crew.join", []string{"a"}, nil},
		"join b":             {"crew.join", []string{"b"}, nil},
		"leave a":            {"crew.leave", []string{"a"}, nil},
		"no ids":             {"order.place", nil, nil},
		"one empty id":       {"order.place", []string{""}, nil},
		"ids ab, c":          {"x", []string{"ab", "c"}, nil},
		"ids a, bc":          {"x", []string{"a", "bc"}, nil},
		"id a, input b":      {"x", []string{"a"}, []byte("b")},
		"id ab":              {"x", []string{"ab"}, nil},
		"operation xa":       {"xa", nil, nil},
		"operation x, id a":  {"x", []string{"a"}, nil},
		"input 1":            {"wallet.charge", []string{"u"}, []byte("1")},
		"input 10":           {"wallet.charge", []string{"u"}, []byte("10")},
		"operation with NUL": {"x\x00", nil, nil},
	}
	seen := map[string]string{}
	for name, r := range requests {
		fp := guard.Fingerprint(r.operation, r.ids, r.input)
		if again := guard.Fingerprint(r.operation, slices.Clone(r.ids), slices.Clone(r.input)); again != fp {
			t.Errorf("%s: fingerprinted twice, %s then %s", name, fp, again)
		}
		if other, ok := seen[fp]; ok {
			t.Errorf("%s and %s share a fingerprint", name, other)
		}
		seen[fp] = name
	}
}

func TestGuard_ValidatesTheKey(t *testing.T) {
	cases := map[string]struct {
		key  string
		want error
	}{
		"missing":       {"", guard.ErrKeyRequired},
		"too long":      {strings.Repeat("a", guard.MaxKeyLength+1), domain.ErrValidation},
		"non-printable": {"abc\x01", domain.ErrValidation},
		"non-ascii":     {"ключ", domain.ErrValidation},
	}
	forEach(t, entries, func(t *testing.T, e entry) {
		f := newFixture(t)
		g := f.guard(guard.Config{})
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				calls := 0
				_, err := e.run(context.Background(), g, request(tc.key), succeed(&calls))
				if !errors.Is(err, tc.want) || calls != 0 {
					t.Fatalf("err %v, calls %d", err, calls)
				}
			})
		}
		longest := strings.Repeat("~", guard.MaxKeyLength)
		if _, err := e.run(context.Background(), g, request(longest), succeed(new(int))); err != nil {
			t.Fatalf("a %d-character key: %v", guard.MaxKeyLength, err)
		}
	})
}

// A store that does not answer the key fails the request without running it; a lock its lane
// took meanwhile (the key and the lock are taken at once) is released.
func TestGuard_StoreDownFailsWithoutRunningAndLeavesTheLockFree(t *testing.T) {
	forEach(t, entries, func(t *testing.T, e entry) {
		ctrl := gomock.NewController(t)
		store := NewMockIdempotencyStore(ctrl)
		store.EXPECT().Begin(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return(ports.BeginResult{}, ports.ErrUnavailable)
		f := newFixture(t)
		deps := f.deps()
		deps.Idempotency = store
		calls := 0
		_, err := e.run(context.Background(), newGuard(deps, guard.Config{}), request("k1"), succeed(&calls))
		if !errors.Is(err, ports.ErrUnavailable) || calls != 0 {
			t.Fatalf("err %v, calls %d", err, calls)
		}
		awaitLockFree(t, f, lockKey)
	})
}

// The business change is committed, so a failure to store the response must not turn success
// into an error; the store that did not answer gets the response again in the background.
func TestGuard_CompleteFailureStillAnswersSuccess(t *testing.T) {
	forEach(t, entries, func(t *testing.T, e entry) {
		f := newFixture(t)
		ctrl := gomock.NewController(t)
		store := NewMockIdempotencyStore(ctrl)
		req := request("k1")
		store.EXPECT().Begin(gomock.Any(), gomock.Any(), req.Fingerprint, gomock.Any(), gomock.Any()).
			Return(ports.BeginResult{State: ports.BeginStarted, Token: "t1", Fingerprint: req.Fingerprint}, nil)
		response := ports.StoredResponse{Outcome: "created", Body: []byte(`{"N":1}`)}
		stored := make(chan struct{})
		gomock.InOrder(
			store.EXPECT().Complete(gomock.Any(), gomock.Any(), "t1", response, time.Hour).Return(ports.ErrUnavailable),
			store.EXPECT().Complete(gomock.Any(), gomock.Any(), "t1", response, time.Hour).
				DoAndReturn(func(context.Context, ports.IdempotencyKey, string, ports.StoredResponse, time.Duration) error {
					close(stored)
					return nil
				}),
		)
		deps := f.deps()
		deps.Idempotency = store
		res, err := e.run(context.Background(), newGuard(deps, guard.Config{}), req, succeed(new(int)))
		if err != nil || res.Value.N != 1 || res.Outcome != guard.OutcomeCreated {
			t.Fatalf("%+v, %v", res, err)
		}
		awaitLockFree(t, f, lockKey)
		select {
		case <-stored:
		case <-time.After(patience):
			t.Fatal("the response was never stored again")
		}
	})
}

// A client that disconnects mid-request must not leave its lock or key behind: the record is
// completed or deleted, and the lock released, with contexts the request cannot cancel.
func TestGuard_ClosesWithContextsTheRequestCannotCancel(t *testing.T) {
	alive := func(t *testing.T, what string, ctx context.Context) {
		if ctx.Err() != nil {
			t.Errorf("%s got a done context: %v", what, ctx.Err())
		}
	}
	for _, e := range entries {
		for _, succeeds := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s succeeds=%v", e.name, succeeds), func(t *testing.T) {
				ctrl := gomock.NewController(t)
				req := request("k1")
				store := NewMockIdempotencyStore(ctrl)
				store.EXPECT().Begin(gomock.Any(), gomock.Any(), req.Fingerprint, gomock.Any(), gomock.Any()).
					Return(ports.BeginResult{State: ports.BeginStarted, Token: "t1", Fingerprint: req.Fingerprint}, nil)
				if succeeds {
					store.EXPECT().Complete(gomock.Any(), gomock.Any(), "t1", gomock.Any(), gomock.Any()).
						DoAndReturn(func(ctx context.Context, _ ports.IdempotencyKey, _ string, _ ports.StoredResponse, _ time.Duration) error {
							alive(t, "Complete", ctx)
							return nil
						})
				} else {
					store.EXPECT().Delete(gomock.Any(), gomock.Any(), "t1").
						DoAndReturn(func(ctx context.Context, _ ports.IdempotencyKey, _ string) error {
							alive(t, "Delete", ctx)
							return nil
						})
				}
				locker := NewMockLocker(ctrl) // Once takes no lock
				released := make(chan struct{})
				if e.name == onceEntry.name {
					close(released)
				} else {
					lock := NewMockLock(ctrl)
					lock.EXPECT().Release(gomock.Any()).DoAndReturn(func(ctx context.Context) error {
						alive(t, "Release", ctx)
						close(released)
						return nil
					})
					locker.EXPECT().Released(lockKey).Return(nil, func() {})
					locker.EXPECT().TryAcquire(gomock.Any(), lockKey, time.Second).Return(lock, nil)
				}
				deps := newFixture(t).deps()
				deps.Idempotency, deps.Locker = store, locker

				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				res, err := e.run(ctx, newGuard(deps, guard.Config{}), req, func(context.Context) (answer, error) {
					cancel() // the client hangs up while the use case runs
					if succeeds {
						return answer{N: 1}, nil
					}
					return answer{}, errThingFull
				})
				if succeeds && (err != nil || res.Value.N != 1) {
					t.Fatalf("%+v, %v", res, err)
				}
				if !succeeds && !errors.Is(err, errThingFull) {
					t.Fatalf("err %v", err)
				}
				// A batch hands out its answers before it releases its lock.
				select {
				case <-released:
				case <-time.After(patience):
					t.Fatal("the lock was never released")
				}
			})
		}
	}
}

func TestOnce_PanicDeletesTheKeyAndPropagates(t *testing.T) {
	f := newFixture(t)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic was swallowed")
			}
		}()
		_, _ = guard.Once(context.Background(), f.guard(guard.Config{}), request("k1"), func(context.Context) (answer, error) {
			panic("boom")
		})
	}()
	assertKeyFree(t, f, request("k1"))
}

func TestLane_BacksOffOnTheSeedsScheduleUntilTheHoldersTTLEnds(t *testing.T) {
	f := newFixture(t)
	// Another instance holds the lock for 1 s of fake time and dies without releasing it.
	if _, err := f.locker.TryAcquire(context.Background(), lockKey, time.Second); err != nil {
		t.Fatal(err)
	}
	calls := 0
	run := laneEntries[0].run
	if _, err := run(context.Background(), f.guard(guard.Config{LockTTL: time.Second}), request("k1"), succeed(&calls)); err != nil {
		t.Fatal(err)
	}
	// 100+200+400 = 700ms < 1s; after 800ms more (1.5s) the holder's TTL has run out.
	assertDelays(t, f.sleeper.Waits(), ms(100, 200, 400, 800))
	if calls != 1 {
		t.Fatalf("calls %d", calls)
	}
}

func TestLane_LockExhaustionAnswersBusyWithRetryAfterAndDeletesKey(t *testing.T) {
	f := newFixture(t)
	f.hold(t, lockKey)
	calls := 0
	run := laneEntries[0].run
	_, err := run(context.Background(), f.guard(guard.Config{LockTTL: time.Second}), request("k1"), succeed(&calls))
	de, ok := domain.AsError(err)
	if !errors.Is(err, guard.ErrBusy) || !ok || de.RetryAfter != time.Second || calls != 0 {
		t.Fatalf("err %v (%+v), calls %d", err, de, calls)
	}
	assertDelays(t, f.sleeper.Waits(), ms(100, 200, 400, 800, 1600))
	assertKeyFree(t, f, request("k1"))
}

func TestLane_ALaneWithItsOwnLockPolicyWaitsItsWaitThenAnswersItsBusyError(t *testing.T) {
	errSeatBusy := domain.NewError(domain.KindConflict, "SEAT_BEING_SELECTED", "busy")
	cfg := guard.LaneConfig{LockWait: 3 * time.Second, LockTTL: 5 * time.Second, Busy: errSeatBusy}
	batch := func(context.Context, []struct{}) ([]guard.Answer[answer], error) {
		return []guard.Answer[answer]{{}}, nil
	}
	f := newFixture(t)
	held := f.hold(t, lockKey)
	lane := guard.NewLane(f.guard(guard.Config{LockTTL: time.Second}), cfg, batch)
	_, err := lane.Do(context.Background(), lockKey, nil, struct{}{})
	de, ok := domain.AsError(err)
	if !errors.Is(err, errSeatBusy) || !ok || de.RetryAfter != 5*time.Second {
		t.Fatalf("err %v (%+v), want the lane's busy error with Retry-After 5s", err, de)
	}
	// The seeds' schedule, cut at the lane's 3 s wait rather than after five backoffs.
	assertDelays(t, f.sleeper.Waits(), ms(100, 200, 400, 800, 1500))

	// Holding the lock, the lane's TTL (5 s, not the guard's 1 s) keeps others out for 4 s.
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	lane = guard.NewLane(f.guard(guard.Config{LockTTL: time.Second}), cfg,
		func(ctx context.Context, in []struct{}) ([]guard.Answer[answer], error) {
			f.clock.Advance(4 * time.Second)
			if _, err := f.locker.TryAcquire(ctx, lockKey, time.Second); !errors.Is(err, ports.ErrLockNotAcquired) {
				t.Errorf("TryAcquire 4 s into the hold: %v, want the lock still held", err)
			}
			return batch(ctx, in)
		})
	if _, err := lane.Do(context.Background(), lockKey, nil, struct{}{}); err != nil {
		t.Fatal(err)
	}
}

func TestLane_BackoffIsConfigurableAndJittered(t *testing.T) {
	var maxes []time.Duration
	jitter := func(max time.Duration) time.Duration { maxes = append(maxes, max); return max - 1 }
	f := newFixture(t)
	f.hold(t, lockKey)
	g := f.guard(guard.Config{BaseDelay: 10 * time.Millisecond, MaxRetries: 2}, guard.WithJitter(jitter))
	_, err := laneEntries[0].run(context.Background(), g, request("k1"), succeed(new(int)))
	if !errors.Is(err, guard.ErrBusy) {
		t.Fatalf("err %v", err)
	}
	assertDelays(t, f.sleeper.Waits(), []time.Duration{15*time.Millisecond - 1, 30*time.Millisecond - 1})
	assertDelays(t, maxes, ms(5, 10))
}

// A negative MaxRetries is none: one lock attempt, no backoff, then busy (zero is the default
// schedule, so "none" needs its own value).
func TestLane_NegativeMaxRetriesMakesOneAttempt(t *testing.T) {
	f := newFixture(t)
	f.hold(t, lockKey)
	calls := 0
	_, err := laneEntries[0].run(context.Background(), f.guard(guard.Config{MaxRetries: -1}), request("k1"), succeed(&calls))
	if !errors.Is(err, guard.ErrBusy) {
		t.Fatalf("err %v, want guard.ErrBusy", err)
	}
	if waits := f.sleeper.Waits(); len(waits) != 0 || calls != 0 {
		t.Fatalf("backoffs %v and %d calls, want neither", waits, calls)
	}
	assertKeyFree(t, f, request("k1"))
}

func TestBackoff_DefaultJitterStaysBelowHalfTheBase(t *testing.T) {
	g := guard.New(guard.Deps{}, guard.Config{})
	for attempt := range 5 {
		base := 100 * time.Millisecond << attempt
		for range 200 {
			if d := g.Backoff(attempt); d < base || d >= base+base/2 {
				t.Fatalf("attempt %d: %v outside [%v, %v)", attempt, d, base, base+base/2)
			}
		}
	}
}

// awaitKeyFree is assertKeyFree for a record deleted in the background: it waits, within
// patience, until a new Begin starts afresh.
func awaitKeyFree(t *testing.T, f *fixture, req guard.Request) {
	t.Helper()
	key := ports.IdempotencyKey{Scope: req.UserID, Key: req.IdempotencyKey}
	testkit.Eventually(t, patience, "key "+req.IdempotencyKey+" freed", func() error {
		got, err := f.store.Begin(context.Background(), key, req.Fingerprint, time.Minute, time.Hour)
		if err != nil || (got.State != ports.BeginStarted && got.State != ports.BeginInProgress) {
			t.Fatalf("key %s will never be freed: state %v, err %v", req.IdempotencyKey, got.State, err)
		}
		if got.State != ports.BeginStarted {
			return fmt.Errorf("state %v", got.State)
		}
		return nil
	})
}

// A locker that does not answer fails the request at once, without running it or backing off;
// its record, in the same store, is deleted in the background so the answer does not wait.
func TestLane_LockerDownFailsWithoutRunningAndDeletesKey(t *testing.T) {
	forEach(t, laneEntries, func(t *testing.T, e entry) {
		f := newFixture(t)
		ctrl := gomock.NewController(t)
		locker := NewMockLocker(ctrl)
		locker.EXPECT().Released(lockKey).Return(nil, func() {}).AnyTimes()
		locker.EXPECT().TryAcquire(gomock.Any(), lockKey, time.Second).Return(nil, fmt.Errorf("redis: %w", ports.ErrUnavailable))
		deps := f.deps()
		deps.Locker = locker
		calls := 0
		_, err := e.run(context.Background(), newGuard(deps, guard.Config{}), request("k1"), succeed(&calls))
		if !errors.Is(err, ports.ErrUnavailable) || calls != 0 || len(f.sleeper.Waits()) != 0 {
			t.Fatalf("err %v, calls %d, sleeps %v", err, calls, f.sleeper.Waits())
		}
		awaitKeyFree(t, f, request("k1"))
	})
}

func ms(values ...int) []time.Duration {
	out := make([]time.Duration, len(values))
	for i, v := range values {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

func assertDelays(t *testing.T, got, want []time.Duration) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
}

// unreachableDeletes fails the first n Deletes as a frozen Redis would, then passes them on,
// and reports each attempt.
type unreachableDeletes struct {
	*checkedStore
	failures atomic.Int32
	attempts chan struct{}
}

func (s *unreachableDeletes) Delete(ctx context.Context, key ports.IdempotencyKey, token string) error {
	defer func() { s.attempts <- struct{}{} }()
	if s.failures.Add(-1) >= 0 {
		return fmt.Errorf("frozen redis: %w", ports.ErrUnavailable)
	}
	return s.checkedStore.Delete(ctx, key, token)
}

// A rejection while the store does not answer must not leave the key blocked for the whole
// lease: the delete is retried in the background until it lands.
func TestOnce_ADeleteTheStoreDidNotAnswerIsRetriedUntilItLands(t *testing.T) {
	f := newFixture(t)
	store := &unreachableDeletes{checkedStore: f.store, attempts: make(chan struct{}, 10)}
	store.failures.Store(2)
	deps := f.deps()
	deps.Idempotency = store
	g := newGuard(deps, guard.Config{Lease: 30 * time.Second})

	_, err := guard.Once(context.Background(), g, request("k1"), func(context.Context) (answer, error) {
		return answer{}, errThingFull
	})
	if !errors.Is(err, errThingFull) {
		t.Fatalf("err %v", err)
	}
	for attempt := 1; attempt <= 3; attempt++ {
		select {
		case <-store.attempts:
		case <-time.After(5 * time.Second):
			t.Fatalf("delete attempt %d never came", attempt)
		}
	}
	assertKeyFree(t, f, request("k1"))
	if waits := f.sleeper.Waits(); len(waits) != 2 || waits[0] != 100*time.Millisecond || waits[1] != 200*time.Millisecond {
		t.Fatalf("waits between delete attempts %v, want 100ms then 200ms", waits)
	}
}

// PruneMarkers deletes, in rounds of the given size, every marker older than the idempotency
// TTL, and none younger.
func TestGuard_PruneMarkersDeletesOnlyExpiredMarkersInRounds(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	save := func(key string) {
		t.Helper()
		err := f.markers.Save(ctx, []ports.IdempotencyMarker{{
			Key: ports.IdempotencyKey{Scope: "u1", Key: key}, Fingerprint: "fp",
			Response: ports.StoredResponse{Outcome: string(guard.OutcomeCreated), Body: []byte(`{}`)}, CreatedAt: f.clock.Now(),
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		save(fmt.Sprintf("old-%d", i))
	}
	f.clock.Advance(30 * time.Minute)
	save("young")
	f.clock.Advance(31 * time.Minute) // the old ones are past the 1h TTL, the young one is not

	deleted, err := f.guard(guard.Config{IdempotencyTTL: time.Hour}).PruneMarkers(ctx, 2)
	if err != nil || deleted != 5 {
		t.Fatalf("pruned %d, %v; want 5", deleted, err)
	}
	var keys []ports.IdempotencyKey
	for _, k := range []string{"old-0", "old-4", "young"} {
		keys = append(keys, ports.IdempotencyKey{Scope: "u1", Key: k})
	}
	left, err := f.markers.Find(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := left[ports.IdempotencyKey{Scope: "u1", Key: "young"}]; !ok || len(left) != 1 {
		t.Fatalf("markers left %v, want only the young one", left)
	}
}

// OnceMarked commits its answer with the write: after the store lost every record (Redis
// restarted empty), the key replays the first answer and the write run again is rolled back,
// and the key reused for another request is refused by the marker's fingerprint.
func TestOnceMarked_TheMarkerAnswersWhatTheStoreLost(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// The write stores a row of its own (a marker of another scope), so that what it committed
	// can be counted.
	var runs atomic.Int32
	write := func(ctx context.Context) (string, error) {
		id := fmt.Sprint("order-", runs.Add(1))
		return id, f.markers.Save(ctx, []ports.IdempotencyMarker{{Key: ports.IdempotencyKey{Scope: "orders", Key: id}}})
	}
	committed := func() int {
		found, err := f.markers.Find(ctx, []ports.IdempotencyKey{{Scope: "orders", Key: "order-1"},
			{Scope: "orders", Key: "order-2"}, {Scope: "orders", Key: "order-3"}})
		if err != nil {
			t.Fatal(err)
		}
		return len(found)
	}
	req := guard.Request{UserID: "u1", IdempotencyKey: "k", Fingerprint: "place", Outcome: guard.OutcomeCreated}
	first, err := guard.OnceMarked(ctx, f.guard(guard.Config{}), req, write)
	if err != nil || first.Value != "order-1" || first.Replayed {
		t.Fatalf("first: %+v, %v", first, err)
	}

	f.store.IdempotencyStore = memory.NewIdempotencyStore(f.clock) // every record lost
	again, err := guard.OnceMarked(ctx, f.guard(guard.Config{}), req, write)
	if err != nil || again.Value != "order-1" || !again.Replayed || committed() != 1 {
		t.Fatalf("after the loss: %+v, %v, %d writes committed; want the replay of order-1 and one", again, err, committed())
	}
	f.store.IdempotencyStore = memory.NewIdempotencyStore(f.clock)
	req.Fingerprint = "another"
	if _, err := guard.OnceMarked(ctx, f.guard(guard.Config{}), req, write); !errors.Is(err, guard.ErrKeyReused) || committed() != 1 {
		t.Fatalf("the key reused after the loss: %v, %d writes committed; want ErrKeyReused and one", err, committed())
	}
}

// OnceMarked looks for the key's marker when the write refuses, too: a retry whose write finds
// nothing left to do (the cart it ordered now empty) replays the first answer rather than the
// refusal.
func TestOnceMarked_ARefusedRetryReplaysTheMarker(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	errEmpty := errors.New("empty cart")
	placed := false
	write := func(context.Context) (string, error) {
		if placed {
			return "", errEmpty
		}
		placed = true
		return "order-1", nil
	}
	req := guard.Request{UserID: "u1", IdempotencyKey: "k", Fingerprint: "place", Outcome: guard.OutcomeCreated}
	if _, err := guard.OnceMarked(ctx, f.guard(guard.Config{}), req, write); err != nil {
		t.Fatal(err)
	}
	f.store.IdempotencyStore = memory.NewIdempotencyStore(f.clock) // every record lost
	again, err := guard.OnceMarked(ctx, f.guard(guard.Config{}), req, write)
	if err != nil || again.Value != "order-1" || !again.Replayed {
		t.Fatalf("after the loss: %+v, %v; want the replay of order-1", again, err)
	}
	if _, err := guard.OnceMarked(ctx, f.guard(guard.Config{}), guard.Request{UserID: "u1", IdempotencyKey: "k2",
		Fingerprint: "place", Outcome: guard.OutcomeCreated}, write); !errors.Is(err, errEmpty) {
		t.Fatalf("another key: %v, want the refusal", err)
	}
}

// countedFinds is a marker repository that counts its reads.
type countedFinds struct {
	ports.IdempotencyMarkerRepository
	finds atomic.Int32
}

func (c *countedFinds) Find(ctx context.Context, keys []ports.IdempotencyKey) (map[ports.IdempotencyKey]ports.IdempotencyMarker, error) {
	c.finds.Add(1)
	return c.IdempotencyMarkerRepository.Find(ctx, keys)
}

// A write the database did not answer answers at once: OnceMarked does not read the marker
// then, which would make the request wait for the database a second time.
func TestOnceMarked_AnUnavailableDatabaseIsNotAskedForTheMarker(t *testing.T) {
	f := newFixture(t)
	markers := &countedFinds{IdempotencyMarkerRepository: f.markers}
	deps := f.deps()
	deps.Markers = markers
	down := fmt.Errorf("db: %w", ports.ErrUnavailable)
	req := guard.Request{UserID: "u1", IdempotencyKey: "k", Fingerprint: "place", Outcome: guard.OutcomeCreated}
	_, err := guard.OnceMarked(context.Background(), newGuard(deps, guard.Config{}), req,
		func(context.Context) (string, error) { return "", down })
	if !errors.Is(err, ports.ErrUnavailable) || markers.finds.Load() != 0 {
		t.Fatalf("%v after %d marker reads, want ErrUnavailable after none", err, markers.finds.Load())
	}
}
