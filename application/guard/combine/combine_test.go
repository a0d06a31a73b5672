package combine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rushgate/rushgate/ports"
)

// patience bounds every wait on another goroutine; a test that needs it has failed.
const patience = 10 * time.Second

// gatedRun is a batch function that records its batches and holds the first one until
// released, so the calls that arrive meanwhile must wait and go out together. Each call is
// answered "key:input", unless fail says otherwise for its whole batch.
type gatedRun struct {
	release chan struct{}
	fail    func(batch []int) error

	mu      sync.Mutex
	batches [][]int
}

func newGatedRun() *gatedRun { return &gatedRun{release: make(chan struct{})} }

func (g *gatedRun) run(_ context.Context, key string, batch []int) ([]Answer[string], error) {
	g.mu.Lock()
	first := len(g.batches) == 0
	g.batches = append(g.batches, append([]int(nil), batch...))
	g.mu.Unlock()
	if first {
		<-g.release
	}
	if g.fail != nil {
		if err := g.fail(batch); err != nil {
			return nil, err
		}
	}
	answers := make([]Answer[string], len(batch))
	for i, in := range batch {
		answers[i].Value = fmt.Sprintf("%s:%d", key, in)
	}
	return answers, nil
}

func (g *gatedRun) recorded() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return fmt.Sprint(g.batches)
}

func (g *gatedRun) runs() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.batches)
}

// waitFor polls cond until it holds, failing the test after patience (generous: it only
// matters once something is wrong, and a busy machine under -race schedules slowly).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v", what, patience)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitingOn is how many calls of key wait for a batch.
func waitingOn[K comparable, In, Out any](c *Combiner[K, In, Out], key K) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.lines[key]; l != nil {
		return len(l.waiting)
	}
	return 0
}

// keysHeld is how many keys hold calls.
func keysHeld[K comparable, In, Out any](c *Combiner[K, In, Out]) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.lines)
}

type result struct {
	value string
	err   error
}

// start calls c.Do(ctx, key, in) on a goroutine of its own and returns where its answer arrives.
func start(c *Combiner[string, int, string], ctx context.Context, key string, in int) <-chan result {
	done := make(chan result, 1)
	go func() {
		v, err := c.Do(ctx, key, in)
		done <- result{v, err}
	}()
	return done
}

func await(t *testing.T, done <-chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(patience):
		t.Fatal("no answer")
		return result{}
	}
}

// holdFirstBatch starts call 0 on key "e", waits until its batch runs (held by g), then starts
// the calls 1..n one at a time, each once the previous one waits, so their arrival order is
// known. It returns every call's answer channel, call 0's first.
func holdFirstBatch(t *testing.T, c *Combiner[string, int, string], g *gatedRun, n int) []<-chan result {
	t.Helper()
	calls := []<-chan result{start(c, context.Background(), "e", 0)}
	waitFor(t, "the first batch runs", func() bool { return g.runs() == 1 })
	for i := 1; i <= n; i++ {
		calls = append(calls, start(c, context.Background(), "e", i))
		waitFor(t, fmt.Sprintf("call %d waits", i), func() bool { return waitingOn(c, "e") == i })
	}
	return calls
}

func TestCombiner_CallsArrivingDuringABatchGoOutTogetherInOrderEachWithItsOwnAnswer(t *testing.T) {
	g := newGatedRun()
	c := New(Config[string, int]{MaxBatch: 64}, g.run)
	calls := holdFirstBatch(t, c, g, 5)
	close(g.release)
	for i, done := range calls {
		if r := await(t, done); r.err != nil || r.value != fmt.Sprintf("e:%d", i) {
			t.Errorf("call %d answered %q, %v", i, r.value, r.err)
		}
	}
	if got := g.recorded(); got != "[[0] [1 2 3 4 5]]" {
		t.Fatalf("batches %s, want [[0] [1 2 3 4 5]]", got)
	}
	waitFor(t, "the idle key is forgotten", func() bool { return keysHeld(c) == 0 })
}

func TestCombiner_MaxBatchSplitsABurstIntoOrderedBatches(t *testing.T) {
	g := newGatedRun()
	c := New(Config[string, int]{MaxBatch: 3}, g.run)
	calls := holdFirstBatch(t, c, g, 7)
	close(g.release)
	for _, done := range calls {
		await(t, done)
	}
	if got := g.recorded(); got != "[[0] [1 2 3] [4 5 6] [7]]" {
		t.Fatalf("batches %s", got)
	}
}

func TestCombiner_KeysDoNotWaitForEachOther(t *testing.T) {
	g := newGatedRun()
	c := New(Config[string, int]{MaxBatch: 64}, g.run)
	held := start(c, context.Background(), "held", 0)
	waitFor(t, "the first batch runs", func() bool { return g.runs() == 1 })
	if r := await(t, start(c, context.Background(), "other", 7)); r.err != nil || r.value != "other:7" {
		t.Fatalf("other key answered %q, %v while the first key's batch was held", r.value, r.err)
	}
	close(g.release)
	await(t, held)
}

func TestCombiner_UpToInFlightBatchesOfAKeyRunAtOnce(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	running, most := 0, 0
	c := New(Config[string, int]{MaxBatch: 64, InFlight: 2}, func(_ context.Context, _ string, batch []int) ([]Answer[int], error) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		<-release
		mu.Lock()
		running--
		mu.Unlock()
		return make([]Answer[int], len(batch)), nil
	})
	started := func() int {
		mu.Lock()
		defer mu.Unlock()
		return running
	}
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() { _, _ = c.Do(context.Background(), "e", i) })
		waitFor(t, fmt.Sprintf("call %d runs at once", i), func() bool { return started() == i+1 })
	}
	wg.Go(func() { _, _ = c.Do(context.Background(), "e", 2) })
	waitFor(t, "the third call waits", func() bool { return waitingOn(c, "e") == 1 })
	close(release)
	wg.Wait()
	if most != 2 {
		t.Fatalf("%d batches ran at once, want 2", most)
	}
	waitFor(t, "the idle key is forgotten", func() bool { return keysHeld(c) == 0 })
}

func TestCombiner_ABatchErrorAnswersItsCallsOnly(t *testing.T) {
	rejected := errors.New("constraint violated")
	g := newGatedRun()
	g.fail = func(batch []int) error {
		if batch[0] == 0 {
			return rejected
		}
		return nil
	}
	c := New(Config[string, int]{MaxBatch: 2}, g.run)
	calls := holdFirstBatch(t, c, g, 2)
	close(g.release)
	if r := await(t, calls[0]); !errors.Is(r.err, rejected) {
		t.Fatalf("call 0: %q, %v; want its batch's error", r.value, r.err)
	}
	for i, done := range calls[1:] {
		if r := await(t, done); r.err != nil {
			t.Errorf("call %d, behind the failed batch: %v", i+1, r.err)
		}
	}
	if got := g.recorded(); got != "[[0] [1 2]]" {
		t.Fatalf("batches %s", got)
	}
}

// With a timeout, a batch runs until the deadline of its earliest call, counted from that
// call's arrival, not from when its turn came: a call that waited behind a slow batch has only
// what is left of its timeout. The test reads the deadlines the batches were given.
func TestCombiner_ATimeoutBoundsEachCallFromItsArrivalWaitInLineIncluded(t *testing.T) {
	const timeout = time.Hour // never reached: only the deadlines are read
	g := newGatedRun()
	var mu sync.Mutex
	var deadlines []time.Time
	c := New(Config[string, int]{MaxBatch: 64, Timeout: timeout}, func(ctx context.Context, key string, batch []int) ([]Answer[string], error) {
		d, ok := ctx.Deadline()
		if !ok {
			t.Errorf("batch %v ran without a deadline", batch)
		}
		mu.Lock()
		deadlines = append(deadlines, d)
		mu.Unlock()
		return g.run(ctx, key, batch)
	})
	firstBefore := time.Now()
	first := start(c, context.Background(), "e", 0)
	waitFor(t, "the first batch runs", func() bool { return g.runs() == 1 })
	secondBefore := time.Now()
	second := start(c, context.Background(), "e", 1)
	waitFor(t, "the second call waits", func() bool { return waitingOn(c, "e") == 1 })
	secondAfter := time.Now()
	// The second call's turn comes well after its arrival: a deadline counted from its turn
	// would be later than its arrival's.
	time.Sleep(20 * time.Millisecond)
	close(g.release)
	await(t, first)
	await(t, second)

	mu.Lock()
	defer mu.Unlock()
	if len(deadlines) != 2 {
		t.Fatalf("%d batches, want 2", len(deadlines))
	}
	if d := deadlines[0]; d.Before(firstBefore.Add(timeout)) || d.After(secondBefore.Add(timeout)) {
		t.Errorf("first batch's deadline %v is not its call's arrival + %v", d, timeout)
	}
	if d := deadlines[1]; d.Before(secondBefore.Add(timeout)) || d.After(secondAfter.Add(timeout)) {
		t.Errorf("second batch's deadline %v is not its call's arrival (%v–%v) + %v", d, secondBefore, secondAfter, timeout)
	}
}

// A batch that outlives its timeout fails at its deadline, and so do the calls waiting behind
// it: none of them waits past its own deadline for a turn.
func TestCombiner_ABatchThatReachesItsDeadlineAnswersTheCallsWaitingBehindIt(t *testing.T) {
	const timeout = 50 * time.Millisecond
	g := newGatedRun()
	firstRuns := make(chan struct{})
	c := New(Config[string, int]{MaxBatch: 64, Timeout: timeout}, func(ctx context.Context, key string, batch []int) ([]Answer[string], error) {
		if batch[0] == 0 {
			close(firstRuns)
			<-ctx.Done() // a store that does not answer in time
			return nil, fmt.Errorf("store: %w: %w", ports.ErrUnavailable, ctx.Err())
		}
		return g.run(ctx, key, batch)
	})
	calls := []<-chan result{start(c, context.Background(), "e", 0)}
	select {
	case <-firstRuns:
	case <-time.After(patience):
		t.Fatal("the first batch did not run")
	}
	for i := 1; i <= 2; i++ {
		calls = append(calls, start(c, context.Background(), "e", i))
		waitFor(t, fmt.Sprintf("call %d waits", i), func() bool { return waitingOn(c, "e") == i })
	}
	for i, done := range calls {
		if r := await(t, done); !errors.Is(r.err, ports.ErrUnavailable) || !errors.Is(r.err, context.DeadlineExceeded) {
			t.Errorf("call %d: %v, want the batch's deadline as unavailable", i, r.err)
		}
	}
	if g.runs() != 0 {
		t.Fatalf("batches %s ran after the timed-out one", g.recorded())
	}
}

// With a dependency not answering, the calls waiting behind a failed batch are not sent after
// it, each batch waiting its own timeout: they hear the batch's error at once.
func TestCombiner_AnUnavailableDependencyAnswersTheCallsWaitingBehindTheBatch(t *testing.T) {
	down := fmt.Errorf("redis frozen: %w", ports.ErrUnavailable)
	g := newGatedRun()
	g.fail = func([]int) error { return down }
	c := New(Config[string, int]{MaxBatch: 64}, g.run)
	calls := holdFirstBatch(t, c, g, 2)
	close(g.release)
	for i, done := range calls {
		if r := await(t, done); !errors.Is(r.err, down) {
			t.Errorf("call %d: %v, want the batch's error", i, r.err)
		}
	}
	if got := g.recorded(); got != "[[0]]" {
		t.Fatalf("batches %s, want only the failed one", got)
	}
	waitFor(t, "the idle key is forgotten", func() bool { return keysHeld(c) == 0 })
}

// A batch function may serve some calls before a dependency goes away: those calls keep their
// answers, and only the calls waiting behind the batch hear the error.
func TestCombiner_AnswersThatComeWithAnUnavailableErrorAnswerTheBatch(t *testing.T) {
	down := fmt.Errorf("database gone: %w", ports.ErrUnavailable)
	release := make(chan struct{})
	var mu sync.Mutex
	runs := 0
	c := New(Config[string, int]{MaxBatch: 1}, func(_ context.Context, _ string, batch []int) ([]Answer[string], error) {
		mu.Lock()
		runs++
		mu.Unlock()
		<-release
		return []Answer[string]{{Value: "served"}}, down
	})
	first := start(c, context.Background(), "e", 0)
	waitFor(t, "the first batch runs", func() bool { mu.Lock(); defer mu.Unlock(); return runs == 1 })
	behind := start(c, context.Background(), "e", 1)
	waitFor(t, "a call waits", func() bool { return waitingOn(c, "e") == 1 })
	close(release)
	if r := await(t, first); r.err != nil || r.value != "served" {
		t.Fatalf("the served call: %q, %v", r.value, r.err)
	}
	if r := await(t, behind); !errors.Is(r.err, down) {
		t.Fatalf("the call behind: %q, %v; want the dependency's error", r.value, r.err)
	}
}

func TestCombiner_AWrongNumberOfAnswersFailsTheBatch(t *testing.T) {
	c := New(Config[string, int]{MaxBatch: 64}, func(context.Context, string, []int) ([]Answer[string], error) {
		return nil, nil
	})
	if _, err := c.Do(context.Background(), "e", 0); err == nil {
		t.Fatal("a batch answered without an answer per call")
	}
}

func TestCombiner_APanickingBatchAnswersItsCallsAndTheKeyGoesOn(t *testing.T) {
	g := newGatedRun()
	g.fail = func(batch []int) error {
		if batch[0] == 0 {
			panic("script reply not understood")
		}
		return nil
	}
	c := New(Config[string, int]{MaxBatch: 1}, g.run)
	calls := holdFirstBatch(t, c, g, 1)
	close(g.release)
	if r := await(t, calls[0]); !errors.Is(r.err, ErrPanicked) {
		t.Fatalf("a call whose batch panicked answered %q, %v", r.value, r.err)
	}
	if r := await(t, calls[1]); r.err != nil || r.value != "e:1" {
		t.Fatalf("the next call answered %q, %v: the key must not stay held", r.value, r.err)
	}
}

// A call that gives up while it waits leaves the line unsent; its neighbours are not failed.
func TestCombiner_ACallGivingUpWhileWaitingLeavesTheLine(t *testing.T) {
	g := newGatedRun()
	c := New(Config[string, int]{MaxBatch: 64}, g.run)
	first := start(c, context.Background(), "e", 0)
	waitFor(t, "the first batch runs", func() bool { return g.runs() == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	impatient := start(c, ctx, "e", 1)
	waitFor(t, "the impatient call waits", func() bool { return waitingOn(c, "e") == 1 })
	patient := start(c, context.Background(), "e", 2)
	waitFor(t, "the patient call waits", func() bool { return waitingOn(c, "e") == 2 })

	cancel()
	if r := await(t, impatient); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the call that gave up answered %q, %v; want context.Canceled", r.value, r.err)
	}
	close(g.release)
	await(t, first)
	if r := await(t, patient); r.err != nil || r.value != "e:2" {
		t.Fatalf("its neighbour answered %q, %v", r.value, r.err)
	}
	if got := g.recorded(); got != "[[0] [2]]" {
		t.Fatalf("batches %s: the call that left must not be sent", got)
	}
}

// A batch serves several callers: it runs detached from the context of the call that sends it,
// and a call taken into it waits for its answer whatever its own context does.
func TestCombiner_ABatchOutlivesItsCallersContexts(t *testing.T) {
	release := make(chan struct{})
	sent := make(chan context.Context, 1)
	c := New(Config[string, int]{MaxBatch: 64}, func(ctx context.Context, _ string, batch []int) ([]Answer[string], error) {
		sent <- ctx
		<-release
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return make([]Answer[string], len(batch)), nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := start(c, ctx, "e", 0)
	var batchCtx context.Context
	select {
	case batchCtx = <-sent:
	case <-time.After(patience):
		t.Fatal("the batch never ran")
	}
	cancel()
	select {
	case r := <-done:
		t.Fatalf("answered %q, %v before its batch ended", r.value, r.err)
	default:
	}
	close(release)
	if r := await(t, done); r.err != nil {
		t.Fatalf("the batch was cut off with its caller's context: %v", r.err)
	}
	if batchCtx.Err() != nil {
		t.Fatal("the batch's context ended with its caller's")
	}
}

// gate is a Gate that counts its passes and releases, holds each pass until told, and fails a
// pass or a release when set to.
type gate struct {
	open                  chan struct{}
	failOpen, failRelease error

	mu               sync.Mutex
	passes, releases int
}

func (g *gate) pass(ctx context.Context, _ string, _ int) (func() error, error) {
	g.mu.Lock()
	g.passes++
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if g.failOpen != nil {
		return nil, g.failOpen
	}
	return func() error {
		g.mu.Lock()
		g.releases++
		g.mu.Unlock()
		return g.failRelease
	}, nil
}

func (g *gate) counts() (passes, releases int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.passes, g.releases
}

// holdAtGate starts calls 0..n-1 on key "e" one at a time while the gate holds call 0.
func holdAtGate(t *testing.T, c *Combiner[string, int, string], gt *gate, n int) []<-chan result {
	t.Helper()
	calls := []<-chan result{start(c, context.Background(), "e", 0)}
	waitFor(t, "call 0 waits at the gate", func() bool { p, _ := gt.counts(); return p == 1 })
	for i := 1; i < n; i++ {
		calls = append(calls, start(c, context.Background(), "e", i))
		waitFor(t, fmt.Sprintf("call %d waits", i), func() bool { return waitingOn(c, "e") == i })
	}
	return calls
}

// The calls that arrive while a turn waits at the gate go out in its batch, and the gate is
// released once per batch.
func TestCombiner_CallsArrivingWhileTheGateIsShutJoinItsBatch(t *testing.T) {
	g := newGatedRun()
	close(g.release)
	gt := &gate{open: make(chan struct{})}
	c := New(Config[string, int]{MaxBatch: 64, Gate: gt.pass}, g.run)
	calls := holdAtGate(t, c, gt, 3)
	close(gt.open)
	for i, done := range calls {
		if r := await(t, done); r.err != nil || r.value != fmt.Sprintf("e:%d", i) {
			t.Errorf("call %d answered %q, %v", i, r.value, r.err)
		}
	}
	if got := g.recorded(); got != "[[0 1 2]]" {
		t.Fatalf("batches %s", got)
	}
	if passes, releases := gt.counts(); passes != 1 || releases != 1 {
		t.Fatalf("%d passes, %d releases; want one of each", passes, releases)
	}
}

func TestCombiner_AGateErrorAnswersTheTurnsCallAndTheNextTakesItsTurn(t *testing.T) {
	busy := errors.New("lock busy")
	g := newGatedRun()
	close(g.release)
	gt := &gate{open: make(chan struct{}), failOpen: busy}
	c := New(Config[string, int]{MaxBatch: 64, Gate: gt.pass}, g.run)
	calls := holdAtGate(t, c, gt, 3)
	close(gt.open)
	for i, done := range calls {
		if r := await(t, done); !errors.Is(r.err, busy) {
			t.Errorf("call %d answered %q, %v; want its own turn's error", i, r.value, r.err)
		}
	}
	if passes, _ := gt.counts(); passes != 3 {
		t.Fatalf("%d passes, want one per call: each takes its turn", passes)
	}
	if got := g.recorded(); got != "[]" {
		t.Fatalf("batches %s, want none", got)
	}
}

func TestCombiner_AnUnavailableGateAnswersEveryWaitingCallAtOnce(t *testing.T) {
	down := fmt.Errorf("lock store frozen: %w", ports.ErrUnavailable)
	g := newGatedRun()
	gt := &gate{open: make(chan struct{}), failOpen: down}
	c := New(Config[string, int]{MaxBatch: 64, Gate: gt.pass}, g.run)
	calls := holdAtGate(t, c, gt, 3)
	close(gt.open)
	for i, done := range calls {
		if r := await(t, done); !errors.Is(r.err, down) {
			t.Errorf("call %d answered %q, %v", i, r.value, r.err)
		}
	}
	if passes, _ := gt.counts(); passes != 1 {
		t.Fatalf("%d passes, want the first call's only", passes)
	}
	waitFor(t, "the idle key is forgotten", func() bool { return keysHeld(c) == 0 })
}

// The batch's other calls are answered before the gate is released; a release the gate's store
// does not answer fails the calls waiting behind the batch, not the batch.
func TestCombiner_AnUnavailableReleaseAnswersTheCallsWaitingBehindTheBatch(t *testing.T) {
	down := fmt.Errorf("lock store frozen: %w", ports.ErrUnavailable)
	g := newGatedRun()
	close(g.release)
	releasing := make(chan struct{})
	gt := &gate{open: make(chan struct{})}
	c := New(Config[string, int]{MaxBatch: 2, Gate: func(ctx context.Context, key string, first int) (func() error, error) {
		release, err := gt.pass(ctx, key, first)
		if err != nil {
			return nil, err
		}
		return func() error {
			<-releasing
			_ = release()
			return down
		}, nil
	}}, g.run)
	calls := holdAtGate(t, c, gt, 3)
	close(gt.open)
	if r := await(t, calls[1]); r.err != nil || r.value != "e:1" {
		t.Fatalf("call 1, in the batch, while the release stalls: %q, %v", r.value, r.err)
	}
	select {
	case r := <-calls[0]:
		t.Fatalf("the turn's call answered before its release returned: %q, %v", r.value, r.err)
	default:
	}
	close(releasing)
	if r := await(t, calls[0]); r.err != nil || r.value != "e:0" {
		t.Fatalf("call 0, whose turn it was: %q, %v", r.value, r.err)
	}
	if r := await(t, calls[2]); !errors.Is(r.err, down) {
		t.Fatalf("call 2, behind the batch: %q, %v", r.value, r.err)
	}
}

func TestCombiner_QueuedHearsEachCallWithTheLengthOfItsLine(t *testing.T) {
	g := newGatedRun()
	var mu sync.Mutex
	var lengths []int
	c := New(Config[string, int]{MaxBatch: 64, Queued: func(key string, length int) {
		mu.Lock()
		defer mu.Unlock()
		lengths = append(lengths, length)
	}}, g.run)
	calls := holdFirstBatch(t, c, g, 2)
	close(g.release)
	for _, done := range calls {
		await(t, done)
	}
	if fmt.Sprint(lengths) != "[1 2 3]" {
		t.Fatalf("lengths %v, want [1 2 3]: the call whose batch is out counts", lengths)
	}
}

func TestNew_RefusesABatchBoundBelowOne(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("MaxBatch 0 was accepted")
		}
	}()
	New(Config[string, int]{}, newGatedRun().run)
}
