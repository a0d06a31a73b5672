package guard_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/guard/guardtest"
	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

// patience bounds every wait on another goroutine; a test that needs it has failed.
const patience = 10 * time.Second

// parkedGuard is the fixture's guard with a parked sleeper: a head waiting for the lock moves
// only when the key is released or its request's context ends, and with the fixture's clock,
// which only moves when told to, no request ever runs out of budget. Its queue reports go to
// f.queues, for enqueue.
func (f *fixture) parkedGuard(cfg guard.Config) *guard.Guard {
	deps := f.deps()
	deps.Sleeper = guardtest.Parked{}
	return newGuard(deps, cfg, guard.WithObserver(f.queues))
}

type outcome struct {
	res guard.Result[answer]
	err error
}

// enqueue starts call on a lane of f.parkedGuard and returns once the lane holds the request in
// its queue.
func (f *fixture) enqueue(t *testing.T, ctx context.Context, call func(ctx context.Context) (guard.Result[answer], error)) <-chan outcome {
	t.Helper()
	done := make(chan outcome, 1)
	go func() {
		res, err := call(ctx)
		done <- outcome{res, err}
	}()
	select {
	case <-f.queues.Joined():
	case o := <-done:
		t.Fatalf("answered without queueing: %+v", o)
	case <-time.After(patience):
		t.Fatal("the request never queued")
	}
	return done
}

func await(t *testing.T, done <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-done:
		return o
	case <-time.After(patience):
		t.Fatal("no answer")
		return outcome{}
	}
}

// recorder is a batch function: it records each batch it is called with and answers each
// request with answer{N: input}, unless answer says otherwise; fail, when set, fails a whole
// batch.
type recorder struct {
	answer func(in int) guard.Answer[answer]
	fail   func(batch []int) error

	mu      sync.Mutex
	batches [][]int
}

func (r *recorder) serve(_ context.Context, batch []int) ([]guard.Answer[answer], error) {
	r.mu.Lock()
	r.batches = append(r.batches, append([]int(nil), batch...))
	r.mu.Unlock()
	if r.fail != nil {
		if err := r.fail(batch); err != nil {
			return nil, err
		}
	}
	answers := make([]guard.Answer[answer], len(batch))
	for i, in := range batch {
		if r.answer != nil {
			answers[i] = r.answer(in)
		} else {
			answers[i].Value = answer{N: in}
		}
	}
	return answers, nil
}

func (r *recorder) calls() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprint(r.batches)
}

func key(in int) string { return fmt.Sprintf("k%d", in) }

// serveQueued holds the lane's lock as another instance would, queues one Run per input in
// order, each only once the previous one is queued, then releases the lock and returns the
// answers in input order.
func serveQueued(t *testing.T, f *fixture, lane *guard.Lane[int, answer], inputs ...int) []outcome {
	t.Helper()
	holder := f.hold(t, lockKey)
	pending := make([]<-chan outcome, len(inputs))
	for i, in := range inputs {
		pending[i] = f.enqueue(t, context.Background(), func(ctx context.Context) (guard.Result[answer], error) {
			return lane.Run(ctx, request(key(in)), in)
		})
	}
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	outcomes := make([]outcome, len(inputs))
	for i := range pending {
		outcomes[i] = await(t, pending[i])
	}
	return outcomes
}

func TestLane_ServesQueuedRequestsInOneBatchEachWithItsOwnAnswerAndRecord(t *testing.T) {
	for _, markers := range []bool{false, true} {
		t.Run(fmt.Sprintf("markers=%v", markers), func(t *testing.T) {
			f := newFixture(t)
			g := f.parkedGuard(guard.Config{})
			r := &recorder{}
			lane := guard.NewLane(g, guard.LaneConfig{Markers: markers}, r.serve)

			outcomes := serveQueued(t, f, lane, 0, 1, 2, 3, 4)
			if got := r.calls(); got != "[[0 1 2 3 4]]" {
				t.Fatalf("batches %s, want the five queued requests in one batch, in arrival order", got)
			}
			for i, o := range outcomes {
				if o.err != nil || o.res.Replayed || o.res.Outcome != guard.OutcomeCreated || o.res.Value.N != i {
					t.Fatalf("request %d: %+v, %v", i, o.res, o.err)
				}
			}
			awaitLockFree(t, f, lockKey)

			// Each request has its own record: its key replays its own answer.
			for i := range outcomes {
				res, err := lane.Run(context.Background(), request(key(i)), 99)
				if err != nil || !res.Replayed || res.Value.N != i {
					t.Fatalf("replay of %s: %+v, %v", key(i), res, err)
				}
			}
			if got := r.calls(); got != "[[0 1 2 3 4]]" {
				t.Fatalf("replays ran the batch function: %s", got)
			}
		})
	}
}

func TestLane_MaxBatchBoundsEachBatch(t *testing.T) {
	cases := []struct {
		maxBatch int
		want     string
	}{
		{0, "[[0 1 2 3 4]]"}, // DefaultMaxBatch
		{1, "[[0] [1] [2] [3] [4]]"},
		{2, "[[0 1] [2 3] [4]]"},
		{3, "[[0 1 2] [3 4]]"},
		{5, "[[0 1 2 3 4]]"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("MaxBatch=%d", tc.maxBatch), func(t *testing.T) {
			f := newFixture(t)
			r := &recorder{}
			lane := guard.NewLane(f.parkedGuard(guard.Config{}), guard.LaneConfig{MaxBatch: tc.maxBatch}, r.serve)
			outcomes := serveQueued(t, f, lane, 0, 1, 2, 3, 4)
			if got := r.calls(); got != tc.want {
				t.Fatalf("batches %s, want %s", got, tc.want)
			}
			for i, o := range outcomes {
				if o.err != nil || o.res.Value.N != i {
					t.Fatalf("request %d: %+v, %v", i, o.res, o.err)
				}
			}
		})
	}
}

func TestLane_AFailedBatchIsRerunOneByOneSoOnlyTheBadRequestFails(t *testing.T) {
	for _, markers := range []bool{false, true} {
		t.Run(fmt.Sprintf("markers=%v", markers), func(t *testing.T) {
			f := newFixture(t)
			errConstraint := errors.New("constraint violated")
			r := &recorder{fail: func(batch []int) error {
				for _, in := range batch {
					if in == 1 {
						return errConstraint
					}
				}
				return nil
			}}
			lane := guard.NewLane(f.parkedGuard(guard.Config{}), guard.LaneConfig{Markers: markers}, r.serve)

			outcomes := serveQueued(t, f, lane, 0, 1, 2)
			if got := r.calls(); got != "[[0 1 2] [0] [1] [2]]" {
				t.Fatalf("batches %s", got)
			}
			if !errors.Is(outcomes[1].err, errConstraint) {
				t.Fatalf("the bad request: %+v, %v", outcomes[1].res, outcomes[1].err)
			}
			for _, i := range []int{0, 2} {
				if o := outcomes[i]; o.err != nil || o.res.Value.N != i {
					t.Fatalf("neighbour %d: %+v, %v", i, o.res, o.err)
				}
			}
			assertKeyFree(t, f, request(key(1)))
			awaitLockFree(t, f, lockKey)
		})
	}
}

// TestLane_AConflictingBatchIsRerunWholeThenAnswersTheConflict: a batch failing with a version
// conflict runs again whole, in a fresh transaction, up to ConflictRetries times; one that
// stops conflicting answers normally, one that never does answers every request the conflict
// error, whose domain error the client hears, and drops their keys.
func TestLane_AConflictingBatchIsRerunWholeThenAnswersTheConflict(t *testing.T) {
	errStale := fmt.Errorf("%w: %w", ports.ErrVersionConflict, errThingFull)
	for _, tc := range []struct {
		name      string
		conflicts int
		want      string
	}{
		{"conflicts twice then succeeds", 2, "[[0 1] [0 1] [0 1]]"},
		{"conflicts through every retry", 100, "[[0 1] [0 1] [0 1] [0 1]]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			runs := 0
			r := &recorder{fail: func([]int) error {
				if runs++; runs <= tc.conflicts {
					return errStale
				}
				return nil
			}}
			lane := guard.NewLane(f.parkedGuard(guard.Config{}), guard.LaneConfig{Markers: true, ConflictRetries: 3}, r.serve)
			outcomes := serveQueued(t, f, lane, 0, 1)
			if got := r.calls(); got != tc.want {
				t.Fatalf("batches %s, want %s", got, tc.want)
			}
			for i, o := range outcomes {
				if tc.conflicts > 3 {
					if !errors.Is(o.err, errThingFull) || !errors.Is(o.err, ports.ErrVersionConflict) {
						t.Fatalf("request %d: %+v, %v; want the conflict", i, o.res, o.err)
					}
					assertKeyFree(t, f, request(key(i)))
					continue
				}
				if o.err != nil || o.res.Value.N != i {
					t.Fatalf("request %d: %+v, %v", i, o.res, o.err)
				}
			}
			awaitLockFree(t, f, lockKey)
		})
	}
}

func TestLane_ARejectedRequestDropsOnlyItsOwnKey(t *testing.T) {
	f := newFixture(t)
	r := &recorder{answer: func(in int) guard.Answer[answer] {
		if in == 1 {
			return guard.Answer[answer]{Err: errThingFull}
		}
		return guard.Answer[answer]{Value: answer{N: in}}
	}}
	lane := guard.NewLane(f.parkedGuard(guard.Config{}), guard.LaneConfig{Markers: true}, r.serve)

	outcomes := serveQueued(t, f, lane, 0, 1, 2)
	if got := r.calls(); got != "[[0 1 2]]" {
		t.Fatalf("batches %s: a rejection must not re-run the batch", got)
	}
	if !errors.Is(outcomes[1].err, errThingFull) {
		t.Fatalf("rejected request: %+v, %v", outcomes[1].res, outcomes[1].err)
	}
	assertKeyFree(t, f, request(key(1)))
	for _, i := range []int{0, 2} {
		res, err := lane.Run(context.Background(), request(key(i)), 99)
		if err != nil || !res.Replayed || res.Value.N != i {
			t.Fatalf("key %s after the batch: %+v, %v", key(i), res, err)
		}
	}
}

func TestLane_AKeyWithACommittedMarkerIsAnsweredFromItInsideABatch(t *testing.T) {
	f := newFixture(t)
	req := request(key(1))
	// An earlier request with key k1 committed its marker, but its Complete was lost.
	err := f.markers.Save(context.Background(), []ports.IdempotencyMarker{{
		Key:         ports.IdempotencyKey{Scope: req.UserID, Key: req.IdempotencyKey},
		Fingerprint: req.Fingerprint,
		Response:    ports.StoredResponse{Outcome: string(guard.OutcomeCreated), Body: []byte(`{"N":42}`)},
		CreatedAt:   f.clock.Now(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	lane := guard.NewLane(f.parkedGuard(guard.Config{}), guard.LaneConfig{Markers: true}, r.serve)

	outcomes := serveQueued(t, f, lane, 0, 1, 2)
	// The batch runs without a read first; saving k1's marker again conflicts, which rolls the
	// batch back, and alone each request looks its marker up before running.
	if got := r.calls(); got != "[[0 1 2] [0] [2]]" {
		t.Fatalf("batches %s, want the batch, then only the requests without a marker", got)
	}
	if o := outcomes[1]; o.err != nil || !o.res.Replayed || o.res.Value.N != 42 || o.res.Outcome != guard.OutcomeCreated {
		t.Fatalf("marked request: %+v, %v", o.res, o.err)
	}
	for _, i := range []int{0, 2} {
		if o := outcomes[i]; o.err != nil || o.res.Replayed || o.res.Value.N != i {
			t.Fatalf("request %d: %+v, %v", i, o.res, o.err)
		}
	}
}

func TestLane_ALostCompleteIsAnsweredFromTheMarkerAndNeverAppliedTwice(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// The use case seats one new member per request: the crew's count is what was applied.
	crews, members := memory.NewCrewRepository(f.db), memory.NewCrewMemberRepository(f.db)
	counter, err := crew.New("counter", "applied writes", 10, f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := crews.Create(ctx, counter); err != nil {
		t.Fatal(err)
	}
	runs := 0
	apply := func(ctx context.Context, batch []int) ([]guard.Answer[answer], error) {
		runs++
		answers := make([]guard.Answer[answer], len(batch))
		err := f.db.InTx(ctx, func(ctx context.Context) error {
			c, err := crews.GetForUpdate(ctx, "counter")
			if err != nil {
				return err
			}
			for i, in := range batch {
				m, err := c.Join(fmt.Sprintf("run-%d-%d", runs, i), f.clock.Now())
				if err != nil {
					return err
				}
				if err := members.Add(ctx, m); err != nil {
					return err
				}
				answers[i].Value = answer{N: in}
			}
			return crews.Save(ctx, c)
		})
		return answers, err
	}
	// The guard's background retry of the lost Complete waits as a process that died would: the
	// fixture's sleeper moves the clock, and the retry's waits would run the lease out before
	// the retry within it.
	held := make(chan struct{})
	t.Cleanup(func() { close(held) })
	deps := f.deps()
	deps.Sleeper = heldSleeper(held)
	lane := guard.NewLane(newGuard(deps, guard.Config{Lease: 30 * time.Second}), guard.LaneConfig{Markers: true}, apply)

	f.store.loseCompletes.Store(true) // the business write commits, its record is never completed
	first, err := lane.Run(ctx, request("k7"), 7)
	if err != nil || first.Value.N != 7 {
		t.Fatalf("first: %+v, %v", first, err)
	}
	if _, err := lane.Run(ctx, request("k7"), 7); !errors.Is(err, guard.ErrInProgress) {
		t.Fatalf("retry within the lease: %v", err)
	}

	// Redis answers again only once the lease is over.
	f.clock.Advance(31 * time.Second)
	f.store.loseCompletes.Store(false)
	for attempt := range 2 { // from the marker, then from the record the replay completed
		res, err := lane.Run(ctx, request("k7"), 7)
		if err != nil || !res.Replayed || res.Value != first.Value || res.Outcome != guard.OutcomeCreated {
			t.Fatalf("retry %d after the lease: %+v, %v", attempt, res, err)
		}
	}
	applied, err := crews.Get(ctx, "counter")
	if err != nil {
		t.Fatal(err)
	}
	if applied.CurrentMembers() != 1 {
		t.Fatalf("applied %d times after %d runs, want once", applied.CurrentMembers(), runs)
	}
}

// A request whose context ends while queued leaves without being run and drops its key; when it
// was the head, the next request takes over. The others are served in one batch.
func TestLane_ARequestWhoseContextEndsLeavesTheQueue(t *testing.T) {
	cases := []struct {
		name       string
		leaver     int
		wantServed string
	}{
		{"a waiter", 1, "[[0 2]]"},
		{"the head", 0, "[[1 2]]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			r := &recorder{}
			lane := guard.NewLane(f.parkedGuard(guard.Config{}), guard.LaneConfig{}, r.serve)
			holder := f.hold(t, lockKey)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			queued := make([]<-chan outcome, 3)
			for i := range queued {
				reqCtx := context.Background()
				if i == tc.leaver {
					reqCtx = ctx
				}
				queued[i] = f.enqueue(t, reqCtx, func(ctx context.Context) (guard.Result[answer], error) {
					return lane.Run(ctx, request(key(i)), i)
				})
			}

			cancel()
			if o := await(t, queued[tc.leaver]); !errors.Is(o.err, context.Canceled) {
				t.Fatalf("the request that left: %+v, %v", o.res, o.err)
			}
			assertKeyFree(t, f, request(key(tc.leaver)))
			if err := holder.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			for i, done := range queued {
				if i == tc.leaver {
					continue
				}
				if o := await(t, done); o.err != nil || o.res.Value.N != i {
					t.Fatalf("request %d: %+v, %v", i, o.res, o.err)
				}
			}
			if got := r.calls(); got != tc.wantServed {
				t.Fatalf("batches %s, want %s", got, tc.wantServed)
			}
		})
	}
}

// A request's key is taken while it queues for the lock, yet a key that is refused answers as
// it did when the key came first: a replay or a key in progress is answered at once, however
// long the lock is held elsewhere, and never runs; the requests queued with it are served.
func TestLane_ARefusedKeyIsAnsweredAtOnceWhileItsLineWaitsForTheLock(t *testing.T) {
	f := newFixture(t)
	r := &recorder{}
	lane := guard.NewLane(f.parkedGuard(guard.Config{}), guard.LaneConfig{Markers: true}, r.serve)
	if _, err := lane.Run(context.Background(), request(key(0)), 0); err != nil {
		t.Fatal(err)
	}
	<-f.queues.Joined()
	awaitLockFree(t, f, lockKey)

	holder := f.hold(t, lockKey)
	first := f.enqueue(t, context.Background(), func(ctx context.Context) (guard.Result[answer], error) {
		return lane.Run(ctx, request(key(1)), 1)
	})
	replay, err := lane.Run(context.Background(), request(key(0)), 0)
	if err != nil || !replay.Replayed || replay.Value.N != 0 {
		t.Fatalf("the replay while the lock is held: %+v, %v", replay, err)
	}
	// The same key again: whichever of the two takes it waits for the lock, the other hears at
	// once that it is in progress.
	again := make(chan outcome, 1)
	go func() {
		res, err := lane.Run(context.Background(), request(key(1)), 1)
		again <- outcome{res, err}
	}()
	var refused outcome
	waiting := first
	select {
	case refused = <-first:
		waiting = again
	case refused = <-again:
	case <-time.After(patience):
		t.Fatal("neither request with the key in progress was answered while the lock is held")
	}
	if !errors.Is(refused.err, guard.ErrInProgress) {
		t.Fatalf("the key in progress while the lock is held: %+v, %v", refused.res, refused.err)
	}
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o := await(t, waiting); o.err != nil || o.res.Value.N != 1 {
		t.Fatalf("the request queued for the lock: %+v, %v", o.res, o.err)
	}
	if got := r.calls(); got != "[[0] [1]]" {
		t.Fatalf("batches %s, want the first run of each key alone", got)
	}
	awaitLockFree(t, f, lockKey)
}

// signalling is a real Sleeper that reports each wait it starts.
type signalling struct {
	system.Sleeper
	sleeping chan time.Duration
}

func (s signalling) Sleep(ctx context.Context, d time.Duration) error {
	s.sleeping <- d
	return s.Sleeper.Sleep(ctx, d)
}

func TestLane_AHeadWakesWhenTheKeyIsReleasedBeforeItsBackoffEnds(t *testing.T) {
	clock := system.Clock{}
	locker := memory.NewLocker(clock) // shared by both instances, as Redis would be
	instance := func(sleeper ports.Sleeper) *guard.Guard {
		return newGuard(guard.Deps{Locker: locker, Clock: clock, Sleeper: sleeper}, guard.Config{BaseDelay: 10 * time.Second, LockTTL: time.Minute})
	}

	holding, unblock := make(chan struct{}), make(chan struct{})
	other := guard.NewLane(instance(system.Sleeper{}), guard.LaneConfig{}, func(_ context.Context, batch []int) ([]guard.Answer[answer], error) {
		close(holding)
		<-unblock
		return make([]guard.Answer[answer], len(batch)), nil
	})
	otherDone := make(chan error, 1)
	go func() {
		_, err := other.Do(context.Background(), lockKey, nil, 0)
		otherDone <- err
	}()
	<-holding

	sleeper := signalling{sleeping: make(chan time.Duration, 10)}
	lane := guard.NewLane(instance(sleeper), guard.LaneConfig{}, (&recorder{}).serve)
	done := make(chan outcome, 1)
	go func() {
		v, err := lane.Do(context.Background(), lockKey, nil, 1)
		done <- outcome{guard.Result[answer]{Value: v}, err}
	}()
	select {
	case d := <-sleeper.sleeping:
		if d != 10*time.Second {
			t.Fatalf("first backoff %v", d)
		}
	case <-time.After(patience):
		t.Fatal("the head never backed off")
	}

	started := time.Now()
	close(unblock) // the other instance finishes and releases the key
	select {
	case o := <-done:
		if o.err != nil || o.res.Value.N != 1 {
			t.Fatalf("%+v, %v", o.res, o.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the head slept through the release")
	}
	if waited := time.Since(started); waited >= 5*time.Second {
		t.Fatalf("served %v after the release", waited)
	}
	if err := <-otherDone; err != nil {
		t.Fatal(err)
	}
}

func TestLane_TwoInstancesSharingALockKeyServeInTurn(t *testing.T) {
	clock := system.Clock{}
	locker := memory.NewLocker(clock)
	var inside, most atomic.Int32
	serve := func(_ context.Context, batch []int) ([]guard.Answer[answer], error) {
		n := inside.Add(1)
		defer inside.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(100 * time.Microsecond) // widen the window an overlap would show in
		answers := make([]guard.Answer[answer], len(batch))
		for i, in := range batch {
			answers[i].Value = answer{N: in}
		}
		return answers, nil
	}
	lanes := make([]*guard.Lane[int, answer], 2)
	for i := range lanes {
		// Do takes no idempotency record: the instances need only the locker.
		g := guard.New(guard.Deps{Locker: locker, Clock: clock, Sleeper: system.Sleeper{}},
			guard.Config{BaseDelay: 2 * time.Millisecond, MaxRetries: 10})
		lanes[i] = guard.NewLane(g, guard.LaneConfig{MaxBatch: 8}, serve)
	}

	const requests = 200
	errs := make([]error, requests)
	testkit.StartTogether(requests, func(in int) {
		got, err := lanes[in%2].Do(context.Background(), lockKey, nil, in)
		if err == nil && got.N != in {
			err = fmt.Errorf("request %d answered %d", in, got.N)
		}
		errs[in] = err
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if most.Load() != 1 {
		t.Fatalf("%d batches ran at once under one lock key", most.Load())
	}
}

func TestLane_APanickingBatchAnswersEveryoneReleasesTheLockAndDropsTheKeys(t *testing.T) {
	for _, markers := range []bool{false, true} {
		t.Run(fmt.Sprintf("markers=%v", markers), func(t *testing.T) {
			f := newFixture(t)
			r := &recorder{fail: func([]int) error { panic("boom") }}
			lane := guard.NewLane(f.parkedGuard(guard.Config{}), guard.LaneConfig{Markers: markers}, r.serve)

			outcomes := serveQueued(t, f, lane, 0, 1, 2)
			for i, o := range outcomes {
				if o.err == nil || !strings.Contains(o.err.Error(), "boom") {
					t.Fatalf("request %d: %+v, %v", i, o.res, o.err)
				}
				assertKeyFree(t, f, request(key(i)))
			}
			awaitLockFree(t, f, lockKey)
		})
	}
}

var errDependencyDown = fmt.Errorf("database did not answer: %w", ports.ErrUnavailable)

// A batch that fails because a dependency is unavailable is not re-run one request at a time,
// and the requests queued behind it on the key hear the same error at once instead of each
// waiting for the dependency in turn. The store is up, so every key is free once answered.
func TestLane_AnUnavailableDependencyFailsTheBatchAndItsQueueAtOnce(t *testing.T) {
	cases := []struct {
		maxBatch int
		want     string
	}{
		{1, "[[0]]"},     // 1 and 2 queued behind the failed batch
		{0, "[[0 1 2]]"}, // all in the failed batch
	}
	for _, markers := range []bool{false, true} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("markers=%v/MaxBatch=%d", markers, tc.maxBatch), func(t *testing.T) {
				f := newFixture(t)
				r := &recorder{fail: func([]int) error { return errDependencyDown }}
				lane := guard.NewLane(f.parkedGuard(guard.Config{}), guard.LaneConfig{MaxBatch: tc.maxBatch, Markers: markers}, r.serve)

				outcomes := serveQueued(t, f, lane, 0, 1, 2)
				if got := r.calls(); got != tc.want {
					t.Fatalf("batches %s, want %s", got, tc.want)
				}
				for i, o := range outcomes {
					if !errors.Is(o.err, ports.ErrUnavailable) {
						t.Fatalf("request %d: %+v, %v", i, o.res, o.err)
					}
					assertKeyFree(t, f, request(key(i)))
				}
				awaitLockFree(t, f, lockKey)
			})
		}
	}
}

// Re-running a failed batch one by one stops when a request finds the dependency gone: the rest
// of the batch answers that error without running.
func TestLane_ADependencyLostDuringTheSingleRerunsFailsTheRestAtOnce(t *testing.T) {
	f := newFixture(t)
	errConstraint := errors.New("constraint violated")
	r := &recorder{fail: func(batch []int) error {
		switch {
		case len(batch) > 1:
			return errConstraint
		case batch[0] == 1:
			return errDependencyDown
		}
		return nil
	}}
	lane := guard.NewLane(f.parkedGuard(guard.Config{}), guard.LaneConfig{Markers: true}, r.serve)

	outcomes := serveQueued(t, f, lane, 0, 1, 2)
	if got := r.calls(); got != "[[0 1 2] [0] [1]]" {
		t.Fatalf("batches %s, want the batch, then 0 and 1 alone, and 2 not run", got)
	}
	if o := outcomes[0]; o.err != nil || o.res.Value.N != 0 {
		t.Fatalf("request 0, served before the loss: %+v, %v", o.res, o.err)
	}
	for _, i := range []int{1, 2} {
		if o := outcomes[i]; !errors.Is(o.err, ports.ErrUnavailable) {
			t.Fatalf("request %d: %+v, %v", i, o.res, o.err)
		}
	}
}

// stallingLocker is the fixture's locker behind a store that can stall: a stalled call waits
// until the test closes gate, then fails with ports.ErrUnavailable, as a frozen Redis answers at
// its timeout. A stalled Release leaves the lock held, to expire by its TTL.
type stallingLocker struct {
	ports.Locker
	stallAcquire, stallRelease bool // set before the lane runs
	gate                       chan struct{}
	acquires                   atomic.Int32
}

// stallingDeps is the fixture's deps with its locker wrapped in a stallingLocker, which the
// test tells what to stall.
func (f *fixture) stallingDeps() (guard.Deps, *stallingLocker) {
	locker := &stallingLocker{Locker: f.locker, gate: make(chan struct{})}
	deps := f.deps()
	deps.Locker = locker
	return deps, locker
}

func (l *stallingLocker) stall(op string) error {
	<-l.gate
	return fmt.Errorf("frozen redis: %s: %w", op, ports.ErrUnavailable)
}

func (l *stallingLocker) TryAcquire(ctx context.Context, key string, ttl time.Duration) (ports.Lock, error) {
	l.acquires.Add(1)
	if l.stallAcquire {
		return nil, l.stall("lock")
	}
	lock, err := l.Locker.TryAcquire(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	return stallingLock{Lock: lock, locker: l}, nil
}

type stallingLock struct {
	ports.Lock
	locker *stallingLocker
}

func (k stallingLock) Release(ctx context.Context) error {
	if k.locker.stallRelease {
		return k.locker.stall("unlock")
	}
	return k.Lock.Release(ctx)
}

// Once the lock's store does not answer, the queue does not try it head after head: the head's
// failed attempt answers every request queued on the key at once, none runs, and their records
// (in the same store) are deleted in the background rather than before the answers.
func TestLane_LockRetriesStopWhenTheLockStoreIsUnavailable(t *testing.T) {
	f := newFixture(t)
	deps, locker := f.stallingDeps()
	locker.stallAcquire = true
	r := &recorder{}
	lane := guard.NewLane(newGuard(deps, guard.Config{}, guard.WithObserver(f.queues)), guard.LaneConfig{}, r.serve)

	queued := make([]<-chan outcome, 3)
	for i := range queued {
		queued[i] = f.enqueue(t, context.Background(), func(ctx context.Context) (guard.Result[answer], error) {
			return lane.Run(ctx, request(key(i)), i)
		})
	}
	close(locker.gate)
	for i, done := range queued {
		if o := await(t, done); !errors.Is(o.err, ports.ErrUnavailable) {
			t.Fatalf("request %d: %+v, %v", i, o.res, o.err)
		}
	}
	if n := locker.acquires.Load(); n != 1 {
		t.Fatalf("%d lock attempts, want the head's one", n)
	}
	if waits := f.sleeper.Waits(); len(waits) != 0 || r.calls() != "[]" {
		t.Fatalf("backed off %v, ran %s", waits, r.calls())
	}
	for i := range queued {
		awaitKeyFree(t, f, request(key(i)))
	}
}

// A batch's answers, the head's included, do not wait for the lock's release (each request
// stores its record while the lock is released); when the release finds the store unavailable,
// the requests queued behind the batch hear the error at once.
func TestLane_AReleaseTheStoreDoesNotAnswerFailsTheQueueNotTheBatch(t *testing.T) {
	f := newFixture(t)
	deps, locker := f.stallingDeps()
	locker.stallRelease = true
	deps.Sleeper = guardtest.Parked{}
	r := &recorder{}
	lane := guard.NewLane(newGuard(deps, guard.Config{}, guard.WithObserver(f.queues)), guard.LaneConfig{MaxBatch: 2, Markers: true}, r.serve)

	holder := f.hold(t, lockKey)
	queued := make([]<-chan outcome, 3)
	for i := range queued {
		queued[i] = f.enqueue(t, context.Background(), func(ctx context.Context) (guard.Result[answer], error) {
			return lane.Run(ctx, request(key(i)), i)
		})
	}
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if o := await(t, queued[i]); o.err != nil || o.res.Value.N != i {
			t.Fatalf("request %d, in the batch, while the release stalls: %+v, %v", i, o.res, o.err)
		}
	}
	close(locker.gate)
	if o := await(t, queued[2]); !errors.Is(o.err, ports.ErrUnavailable) {
		t.Fatalf("request 2, behind the batch: %+v, %v", o.res, o.err)
	}
	if got := r.calls(); got != "[[0 1]]" {
		t.Fatalf("batches %s", got)
	}
	// The head stored its record while its release stalled: its key replays.
	head := request(key(0))
	testkit.Eventually(t, patience, "the head's record completed", func() error {
		got, err := f.store.Begin(context.Background(), ports.IdempotencyKey{Scope: head.UserID, Key: head.IdempotencyKey}, head.Fingerprint, time.Minute, time.Hour)
		if err != nil || got.State != ports.BeginCompleted {
			return fmt.Errorf("state %v, err %w", got.State, err)
		}
		return nil
	})
}

// Do's answer does not wait for the lock's release either, a lone request's (its batch's head)
// included: seat reservations and coupon issues mostly lead a batch of one, and on a slow lock
// store each answer took the release's round trip on top of its own.
func TestLane_DoAnswersBeforeTheLockIsReleased(t *testing.T) {
	f := newFixture(t)
	deps, locker := f.stallingDeps()
	locker.stallRelease = true
	r := &recorder{}
	lane := guard.NewLane(newGuard(deps, guard.Config{}), guard.LaneConfig{}, r.serve)
	t.Cleanup(func() { close(locker.gate) })

	done := make(chan outcome, 1)
	go func() {
		v, err := lane.Do(context.Background(), lockKey, nil, 7)
		done <- outcome{guard.Result[answer]{Value: v}, err}
	}()
	if o := await(t, done); o.err != nil || o.res.Value.N != 7 {
		t.Fatalf("Do while the release stalls: %+v, %v", o.res, o.err)
	}
}

// heldSleeper sleeps until it is released (closed) or its context ends, moving no clock.
type heldSleeper <-chan struct{}

func (h heldSleeper) Sleep(ctx context.Context, _ time.Duration) error {
	select {
	case <-h:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
