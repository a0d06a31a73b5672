package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rushgate/rushgate/ports"
)

// gatedRun is a combiner run that records its batches and holds the first one until released,
// so the calls that arrive meanwhile must wait and go out together.
type gatedRun struct {
	mu      sync.Mutex
	batches [][]int
	release chan struct{}
	fail    error
}

func (g *gatedRun) run(_ context.Context, key string, batch []int) ([]string, error) {
	g.mu.Lock()
	first := len(g.batches) == 0
	g.batches = append(g.batches, append([]int(nil), batch...))
	g.mu.Unlock()
	if first {
		<-g.release
	}
	if g.fail != nil {
		return nil, g.fail
	}
	out := make([]string, len(batch))
	for i, in := range batch {
		out[i] = fmt.Sprintf("%s:%d", key, in)
	}
	return out, nil
}

func (g *gatedRun) recorded() [][]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.batches
}

// waitFor polls cond until it holds, failing the test after 10 s (generous: it only matters
// once something is wrong, and a busy machine under -race schedules slowly).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// queued is how many calls of key wait behind the batch in flight.
func queued[K comparable, In, Out any](c *combiner[K, In, Out], key K) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.lines[key]; l != nil {
		return len(l.waiting)
	}
	return 0
}

// keysHeld is how many keys have calls waiting or running.
func keysHeld[K comparable, In, Out any](c *combiner[K, In, Out]) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.lines)
}

func TestCombiner_CallsArrivingDuringABatchGoOutTogetherInOrder(t *testing.T) {
	g := &gatedRun{release: make(chan struct{})}
	c := newCombiner(1, g.run)

	answers := make([]string, 6)
	var wg sync.WaitGroup
	wg.Go(func() { answers[0], _ = c.do(context.Background(), "e", 0) })
	waitFor(t, func() bool { return len(g.recorded()) == 1 })
	for i := 1; i < 6; i++ { // one at a time, so their arrival order is known
		wg.Go(func() { answers[i], _ = c.do(context.Background(), "e", i) })
		waitFor(t, func() bool { return queued(c, "e") == i })
	}
	close(g.release)
	wg.Wait()

	batches := g.recorded()
	if len(batches) != 2 || fmt.Sprint(batches[1]) != "[1 2 3 4 5]" {
		t.Fatalf("batches = %v, want [[0] [1 2 3 4 5]]", batches)
	}
	for i, got := range answers {
		if want := fmt.Sprintf("e:%d", i); got != want {
			t.Errorf("call %d answered %q, want %q", i, got, want)
		}
	}
	waitFor(t, func() bool { return keysHeld(c) == 0 }) // the idle key is retired
}

func TestCombiner_KeysDoNotWaitForEachOther(t *testing.T) {
	g := &gatedRun{release: make(chan struct{})}
	c := newCombiner(1, g.run)
	go func() { _, _ = c.do(context.Background(), "held", 0) }()
	waitFor(t, func() bool { return len(g.recorded()) == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := c.do(ctx, "other", 7)
	if err != nil || got != "other:7" {
		t.Fatalf("other key answered %q, %v while the first key's batch was held", got, err)
	}
	close(g.release)
}

func TestCombiner_ABatchErrorAnswersEveryCallOfIt(t *testing.T) {
	down := errors.New("redis down")
	g := &gatedRun{release: make(chan struct{}), fail: down}
	c := newCombiner(1, g.run)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	wg.Go(func() { _, errs[0] = c.do(context.Background(), "e", 0) })
	waitFor(t, func() bool { return len(g.recorded()) == 1 })
	for i := 1; i < 3; i++ {
		wg.Go(func() { _, errs[i] = c.do(context.Background(), "e", i) })
	}
	waitFor(t, func() bool { return queued(c, "e") == 2 })
	close(g.release)
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, down) {
			t.Errorf("call %d: err = %v, want the batch's error", i, err)
		}
	}
}

// With Redis not answering, the calls queued behind a failed run are not sent after it, each
// batch waiting its own timeout: they hear the run's error at once.
func TestCombiner_AnUnavailableRunAnswersTheCallsQueuedBehindIt(t *testing.T) {
	down := fmt.Errorf("redis frozen: %w", ports.ErrUnavailable)
	g := &gatedRun{release: make(chan struct{}), fail: down}
	c := newCombiner(1, g.run)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	wg.Go(func() { _, errs[0] = c.do(context.Background(), "e", 0) })
	waitFor(t, func() bool { return len(g.recorded()) == 1 })
	for i := 1; i < 3; i++ {
		wg.Go(func() { _, errs[i] = c.do(context.Background(), "e", i) })
	}
	waitFor(t, func() bool { return queued(c, "e") == 2 })
	close(g.release)
	wg.Wait()
	if batches := g.recorded(); fmt.Sprint(batches) != "[[0]]" {
		t.Fatalf("batches = %v, want only the failed one", batches)
	}
	for i, err := range errs {
		if !errors.Is(err, ports.ErrUnavailable) {
			t.Errorf("call %d: err = %v, want the run's error", i, err)
		}
	}
	waitFor(t, func() bool { return keysHeld(c) == 0 })
}

func TestCombiner_ACallerGivingUpDoesNotFailItsBatch(t *testing.T) {
	g := &gatedRun{release: make(chan struct{})}
	c := newCombiner(1, g.run)
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = c.do(context.Background(), "e", 0) })
	waitFor(t, func() bool { return len(g.recorded()) == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	impatient := make(chan error, 1)
	go func() { _, err := c.do(ctx, "e", 1); impatient <- err }()
	var patient string
	wg.Go(func() { patient, _ = c.do(context.Background(), "e", 2) })
	waitFor(t, func() bool { return queued(c, "e") == 2 })
	cancel()
	if err := <-impatient; !errors.Is(err, context.Canceled) { // answered while its batch waits
		t.Errorf("the caller that gave up answered %v, want context.Canceled", err)
	}
	close(g.release)
	wg.Wait()
	if patient != "e:2" {
		t.Errorf("its neighbour answered %q, want e:2", patient)
	}
}

func TestCombiner_UpToInFlightBatchesOfAKeyRunAtOnce(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	started := 0
	c := newCombiner(2, func(_ context.Context, _ string, batch []int) ([]int, error) {
		mu.Lock()
		started++
		mu.Unlock()
		<-release
		return batch, nil
	})
	runs := func() int {
		mu.Lock()
		defer mu.Unlock()
		return started
	}
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() { _, _ = c.do(context.Background(), "e", i) })
		waitFor(t, func() bool { return runs() == i+1 }) // each ran alone, at once
	}
	wg.Go(func() { _, _ = c.do(context.Background(), "e", 2) })
	waitFor(t, func() bool { return queued(c, "e") == 1 })
	if runs() != 2 {
		t.Fatalf("%d runs started, want 2: the third call must wait for a free run", runs())
	}
	close(release)
	wg.Wait()
	if runs() != 3 {
		t.Errorf("runs = %d, want 3", runs())
	}
	waitFor(t, func() bool { return keysHeld(c) == 0 }) // the idle key is retired
}

func TestCombiner_APanickingRunAnswersItsCallsAndTheKeyGoesOn(t *testing.T) {
	c := newCombiner(1, func(_ context.Context, _ string, batch []int) ([]int, error) {
		if batch[0] == 0 {
			panic("script reply not understood")
		}
		return batch, nil
	})
	if _, err := c.do(context.Background(), "e", 0); err == nil {
		t.Fatal("a call whose run panicked answered no error")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := c.do(ctx, "e", 1); err != nil || got != 1 {
		t.Fatalf("the next call answered %d, %v; want 1: the key must not stay held", got, err)
	}
}

func TestCombiner_ABurstBeyondTheBatchLimitGoesOutInOrderedBatches(t *testing.T) {
	g := &gatedRun{release: make(chan struct{})}
	c := newCombiner(1, g.run)
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = c.do(context.Background(), "e", 0) })
	waitFor(t, func() bool { return len(g.recorded()) == 1 })
	burst := maxCombined + 5
	for i := 1; i <= burst; i++ { // one at a time, so their arrival order is known
		wg.Go(func() { _, _ = c.do(context.Background(), "e", i) })
		waitFor(t, func() bool { return queued(c, "e") == i })
	}
	close(g.release)
	wg.Wait()

	batches := g.recorded()
	if len(batches) != 3 || len(batches[1]) != maxCombined || len(batches[2]) != 5 {
		t.Fatalf("batch sizes %v, want [1 %d 5]", sizes(batches), maxCombined)
	}
	next := 1
	for _, b := range batches[1:] {
		for _, in := range b {
			if in != next {
				t.Fatalf("batches %v: want the burst in arrival order", batches[1:])
			}
			next++
		}
	}
}

func sizes(batches [][]int) []int {
	n := make([]int, len(batches))
	for i, b := range batches {
		n[i] = len(b)
	}
	return n
}
