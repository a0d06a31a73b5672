package guard_test

//go:generate go tool mockgen -destination=mocks_test.go -package=guard_test github.com/rushgate/rushgate/ports Locker,Lock,IdempotencyStore

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/mock/gomock"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/ports"
)

type fixture struct {
	clock   *memory.Clock
	sleeper *memory.Sleeper
	store   *memory.IdempotencyStore
	locker  *memory.Locker
	guard   *guard.Guard
}

func newFixture(t *testing.T, cfg guard.Config, opts ...guard.Option) *fixture {
	t.Helper()
	clock := memory.NewClock(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	f := &fixture{
		clock:   clock,
		sleeper: memory.NewSleeper(clock),
		store:   memory.NewIdempotencyStore(clock),
		locker:  memory.NewLocker(clock),
	}
	opts = append([]guard.Option{guard.WithJitter(func(time.Duration) time.Duration { return 0 })}, opts...)
	f.guard = guard.New(f.store, f.locker, f.sleeper, cfg, opts...)
	return f
}

func request(key string) guard.Request {
	return guard.Request{
		UserID:         "u1",
		IdempotencyKey: key,
		Fingerprint:    guard.Fingerprint("POST /things/1", []byte(`{"n":1}`)),
		LockKey:        "thing:1",
		SuccessStatus:  201,
	}
}

type answer struct {
	N int `json:"n"`
}

func succeed(calls *int) func(context.Context) (answer, error) {
	return func(context.Context) (answer, error) {
		*calls++
		return answer{N: *calls}, nil
	}
}

// assertKeyFree proves the record was deleted: a new Begin starts afresh.
func assertKeyFree(t *testing.T, f *fixture, req guard.Request) {
	t.Helper()
	got, err := f.store.Begin(context.Background(), ports.IdempotencyKey{Scope: req.UserID, Key: req.IdempotencyKey}, req.Fingerprint, time.Minute, time.Hour)
	if err != nil || got.State != ports.BeginStarted {
		t.Fatalf("key still taken: state %v, err %v", got.State, err)
	}
}

// assertLockFree proves the lock was released.
func assertLockFree(t *testing.T, f *fixture, key string) {
	t.Helper()
	lock, err := f.locker.TryAcquire(context.Background(), key, time.Second)
	if err != nil {
		t.Fatalf("lock %s still held: %v", key, err)
	}
	_ = lock.Release(context.Background())
}

func TestRun_FirstRequestRunsAndStoresResponse(t *testing.T) {
	f := newFixture(t, guard.Config{})
	calls := 0
	res, err := guard.Run(context.Background(), f.guard, request("k1"), succeed(&calls))
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed || res.Status != 201 || res.Value.N != 1 || calls != 1 {
		t.Fatalf("got %+v after %d calls", res, calls)
	}
	assertLockFree(t, f, "thing:1")
}

func TestRun_CompletedKeyIsReplayedWithoutRunning(t *testing.T) {
	f := newFixture(t, guard.Config{})
	calls := 0
	first, _ := guard.Run(context.Background(), f.guard, request("k1"), succeed(&calls))
	again, err := guard.Run(context.Background(), f.guard, request("k1"), succeed(&calls))
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || again.Status != 201 || again.Value != first.Value || calls != 1 {
		t.Fatalf("replay %+v, first %+v, calls %d", again, first, calls)
	}
}

func TestRun_KeysAreScopedPerUser(t *testing.T) {
	f := newFixture(t, guard.Config{})
	calls := 0
	other := request("k1")
	other.UserID = "u2"
	if _, err := guard.Run(context.Background(), f.guard, request("k1"), succeed(&calls)); err != nil {
		t.Fatal(err)
	}
	res, err := guard.Run(context.Background(), f.guard, other, succeed(&calls))
	if err != nil || res.Replayed || calls != 2 {
		t.Fatalf("user u2 saw u1's key: %+v, %v, calls %d", res, err, calls)
	}
}

func TestRun_ReuseWithAnotherPayloadIsRejected(t *testing.T) {
	f := newFixture(t, guard.Config{})
	calls := 0
	if _, err := guard.Run(context.Background(), f.guard, request("k1"), succeed(&calls)); err != nil {
		t.Fatal(err)
	}
	changed := request("k1")
	changed.Fingerprint = guard.Fingerprint("POST /things/1", []byte(`{"n":2}`))
	_, err := guard.Run(context.Background(), f.guard, changed, succeed(&calls))
	if !errors.Is(err, guard.ErrKeyReused) || calls != 1 {
		t.Fatalf("err %v, calls %d", err, calls)
	}
}

func TestRun_InProgressKeyIsRejectedUntilItsLeaseEnds(t *testing.T) {
	f := newFixture(t, guard.Config{Lease: 30 * time.Second})
	req := request("k1")
	// A request that started and then died: its record stays IN_PROGRESS.
	if _, err := f.store.Begin(context.Background(), ports.IdempotencyKey{Scope: "u1", Key: "k1"}, req.Fingerprint, 30*time.Second, time.Hour); err != nil {
		t.Fatal(err)
	}
	calls := 0
	_, err := guard.Run(context.Background(), f.guard, req, succeed(&calls))
	if !errors.Is(err, guard.ErrInProgress) || calls != 0 {
		t.Fatalf("during lease: err %v, calls %d", err, calls)
	}

	f.clock.Advance(31 * time.Second)
	changed := req
	changed.Fingerprint = guard.Fingerprint("POST /things/1", []byte(`{"n":2}`))
	if _, err := guard.Run(context.Background(), f.guard, changed, succeed(&calls)); !errors.Is(err, guard.ErrKeyReused) || calls != 0 {
		t.Fatalf("another payload after the lease: err %v, calls %d", err, calls)
	}
	res, err := guard.Run(context.Background(), f.guard, req, succeed(&calls))
	if err != nil || res.Replayed || calls != 1 {
		t.Fatalf("after lease: %+v, err %v, calls %d", res, err, calls)
	}
}

func TestRun_BusinessRejectionDeletesKeyAndReleasesLock(t *testing.T) {
	f := newFixture(t, guard.Config{})
	rejected := domain.NewError("THING_FULL", "full")
	_, err := guard.Run(context.Background(), f.guard, request("k1"), func(context.Context) (answer, error) {
		return answer{}, rejected
	})
	if !errors.Is(err, rejected) {
		t.Fatalf("err %v", err)
	}
	assertLockFree(t, f, "thing:1")
	assertKeyFree(t, f, request("k1"))
}

func TestRun_PrecheckRejectsBeforeQueueingForTheLock(t *testing.T) {
	f := newFixture(t, guard.Config{})
	// The lock is busy: a request that queued for it would sleep.
	if _, err := f.locker.TryAcquire(context.Background(), "thing:1", time.Hour); err != nil {
		t.Fatal(err)
	}
	rejected := domain.NewError("THING_FULL", "full")
	req := request("k1")
	req.Precheck = func(context.Context) error { return rejected }
	calls := 0
	_, err := guard.Run(context.Background(), f.guard, req, succeed(&calls))
	if !errors.Is(err, rejected) || calls != 0 || len(f.sleeper.Waits()) != 0 {
		t.Fatalf("err %v, calls %d, sleeps %v", err, calls, f.sleeper.Waits())
	}
	assertKeyFree(t, f, req)
}

func TestRun_PrecheckDoesNotHideAReplay(t *testing.T) {
	f := newFixture(t, guard.Config{})
	calls := 0
	if _, err := guard.Run(context.Background(), f.guard, request("k1"), succeed(&calls)); err != nil {
		t.Fatal(err)
	}
	req := request("k1")
	req.Precheck = func(context.Context) error { return domain.NewError("THING_FULL", "full") }
	res, err := guard.Run(context.Background(), f.guard, req, succeed(&calls))
	if err != nil || !res.Replayed || calls != 1 {
		t.Fatalf("%+v, %v, calls %d", res, err, calls)
	}
}

func TestRun_PanicReleasesLockAndDeletesKey(t *testing.T) {
	f := newFixture(t, guard.Config{})
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic was swallowed")
			}
		}()
		_, _ = guard.Run(context.Background(), f.guard, request("k1"), func(context.Context) (answer, error) {
			panic("boom")
		})
	}()
	assertLockFree(t, f, "thing:1")
	assertKeyFree(t, f, request("k1"))
}

func TestRun_BackoffScheduleUntilLockFrees(t *testing.T) {
	f := newFixture(t, guard.Config{LockTTL: time.Second})
	// Another request holds the lock for 1 s of fake time.
	if _, err := f.locker.TryAcquire(context.Background(), "thing:1", time.Second); err != nil {
		t.Fatal(err)
	}
	calls := 0
	if _, err := guard.Run(context.Background(), f.guard, request("k1"), succeed(&calls)); err != nil {
		t.Fatal(err)
	}
	// 100+200+400 = 700ms < 1s; after 800ms more (1.5s) the holder's TTL has run out.
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}
	assertDelays(t, f.sleeper.Waits(), want)
	if calls != 1 {
		t.Fatalf("calls %d", calls)
	}
}

func TestRun_LockExhaustionAnswersBusyAndDeletesKey(t *testing.T) {
	f := newFixture(t, guard.Config{LockTTL: time.Second})
	if _, err := f.locker.TryAcquire(context.Background(), "thing:1", time.Hour); err != nil {
		t.Fatal(err)
	}
	calls := 0
	_, err := guard.Run(context.Background(), f.guard, request("k1"), succeed(&calls))
	de, ok := domain.AsError(err)
	if !errors.Is(err, guard.ErrBusy) || !ok || de.RetryAfter != time.Second || calls != 0 {
		t.Fatalf("err %v (retry after %v), calls %d", err, de, calls)
	}
	assertDelays(t, f.sleeper.Waits(), []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond})
	assertKeyFree(t, f, request("k1"))
}

func TestRun_BackoffIsConfigurableAndJittered(t *testing.T) {
	var maxes []time.Duration
	jitter := func(max time.Duration) time.Duration { maxes = append(maxes, max); return max - 1 }
	f := newFixture(t, guard.Config{BaseDelay: 10 * time.Millisecond, MaxRetries: 2}, guard.WithJitter(jitter))
	if _, err := f.locker.TryAcquire(context.Background(), "thing:1", time.Hour); err != nil {
		t.Fatal(err)
	}
	_, err := guard.Run(context.Background(), f.guard, request("k1"), succeed(new(int)))
	if !errors.Is(err, guard.ErrBusy) {
		t.Fatalf("err %v", err)
	}
	assertDelays(t, f.sleeper.Waits(), []time.Duration{15*time.Millisecond - 1, 30*time.Millisecond - 1})
	assertDelays(t, maxes, []time.Duration{5 * time.Millisecond, 10 * time.Millisecond})
}

func TestBackoff_DefaultJitterStaysBelowHalfTheBase(t *testing.T) {
	g := guard.New(nil, nil, nil, guard.Config{})
	for attempt := range 5 {
		base := 100 * time.Millisecond << attempt
		for range 200 {
			if d := g.Backoff(attempt); d < base || d >= base+base/2 {
				t.Fatalf("attempt %d: %v outside [%v, %v)", attempt, d, base, base+base/2)
			}
		}
	}
}

func TestRun_ValidatesTheKey(t *testing.T) {
	f := newFixture(t, guard.Config{})
	long := make([]byte, guard.MaxKeyLength+1)
	for i := range long {
		long[i] = 'a'
	}
	cases := map[string]struct {
		key  string
		want error
	}{
		"missing":       {"", guard.ErrKeyRequired},
		"too long":      {string(long), domain.ErrValidation},
		"non-printable": {"abc\x01", domain.ErrValidation},
		"non-ascii":     {"ключ", domain.ErrValidation},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			calls := 0
			_, err := guard.Run(context.Background(), f.guard, request(tc.key), succeed(&calls))
			if !errors.Is(err, tc.want) || calls != 0 {
				t.Fatalf("err %v, calls %d", err, calls)
			}
		})
	}
}

func TestRun_LockerDownFailsWithoutRunningAndDeletesKey(t *testing.T) {
	ctrl := gomock.NewController(t)
	locker := NewMockLocker(ctrl)
	locker.EXPECT().TryAcquire(gomock.Any(), "thing:1", time.Second).Return(nil, ports.ErrUnavailable)
	f := newFixture(t, guard.Config{})
	g := guard.New(f.store, locker, f.sleeper, guard.Config{})
	calls := 0
	_, err := guard.Run(context.Background(), g, request("k1"), succeed(&calls))
	if !errors.Is(err, ports.ErrUnavailable) || calls != 0 || len(f.sleeper.Waits()) != 0 {
		t.Fatalf("err %v, calls %d, sleeps %v", err, calls, f.sleeper.Waits())
	}
	assertKeyFree(t, f, request("k1"))
}

func TestRun_StoreDownFailsBeforeLocking(t *testing.T) {
	ctrl := gomock.NewController(t)
	store := NewMockIdempotencyStore(ctrl)
	store.EXPECT().Begin(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return(ports.BeginResult{}, ports.ErrUnavailable)
	locker := NewMockLocker(ctrl) // no calls expected
	g := guard.New(store, locker, memory.NewSleeper(memory.NewClock(time.Time{})), guard.Config{})
	_, err := guard.Run(context.Background(), g, request("k1"), succeed(new(int)))
	if !errors.Is(err, ports.ErrUnavailable) {
		t.Fatalf("err %v", err)
	}
}

// The business change is committed, so a failure to store the response must not turn success
// into an error.
func TestRun_CompleteFailureStillAnswersSuccess(t *testing.T) {
	ctrl := gomock.NewController(t)
	store := NewMockIdempotencyStore(ctrl)
	req := request("k1")
	store.EXPECT().Begin(gomock.Any(), gomock.Any(), req.Fingerprint, gomock.Any(), gomock.Any()).
		Return(ports.BeginResult{State: ports.BeginStarted, Token: "t1", Fingerprint: req.Fingerprint}, nil)
	store.EXPECT().Complete(gomock.Any(), gomock.Any(), "t1", ports.StoredResponse{Status: 201, Body: []byte(`{"n":1}`)}, time.Hour).
		Return(ports.ErrUnavailable)
	f := newFixture(t, guard.Config{})
	g := guard.New(store, f.locker, f.sleeper, guard.Config{})
	res, err := guard.Run(context.Background(), g, req, succeed(new(int)))
	if err != nil || res.Value.N != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
	assertLockFree(t, f, "thing:1")
}

// A client that disconnects mid-request must not leave its lock or key behind.
func TestRun_ReleasesWithAContextTheRequestCannotCancel(t *testing.T) {
	ctrl := gomock.NewController(t)
	lock := NewMockLock(ctrl)
	lock.EXPECT().Release(gomock.Any()).DoAndReturn(func(ctx context.Context) error {
		if ctx.Err() != nil {
			t.Errorf("release got a cancelled context: %v", ctx.Err())
		}
		return nil
	})
	locker := NewMockLocker(ctrl)
	locker.EXPECT().TryAcquire(gomock.Any(), "thing:1", time.Second).Return(lock, nil)
	f := newFixture(t, guard.Config{})
	g := guard.New(f.store, locker, f.sleeper, guard.Config{})

	ctx, cancel := context.WithCancel(context.Background())
	_, err := guard.Run(ctx, g, request("k1"), func(ctx context.Context) (answer, error) {
		cancel()
		return answer{}, ctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	assertKeyFree(t, f, request("k1"))
}

func assertDelays(t *testing.T, got, want []time.Duration) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays %v, want %v", got, want)
		}
	}
}
