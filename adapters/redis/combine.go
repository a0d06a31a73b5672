package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/rushgate/rushgate/ports"
)

const (
	// maxCombined bounds one combined script call: long enough to carry a crowd's burst in one
	// round trip, short enough that the script never blocks Redis for long.
	maxCombined = 128
	// combinedInFlight is how many combined calls of one key may run at once: with one, Redis
	// and the server took turns (each idle while the other worked on the batch); two overlap.
	combinedInFlight = 2
)

// combiner merges concurrent calls that share a key (an event, or an event and a token TTL)
// into one call of run with all their inputs, in arrival order. A key has at most inFlight runs
// at once; calls that arrive while they all run go out together in the next. A crowd entering
// one event then costs Redis one script call per batch instead of one per user, and the server
// one round trip. It is the guard's lane without what the lane adds for SQL (a lock per batch,
// idempotency, the one-by-one fallback): a key with a free run sends a caller's call at once.
//
// Runs of one key in flight together may reach Redis in either order, as concurrent single
// calls may: the order of calls is kept within a batch, not across batches.
//
// A run that fails with ports.ErrUnavailable (Redis did not answer) answers the calls that
// queued behind it with the same error at once: sent next, they would only wait another
// timeout.
//
// A batch runs detached from its callers' contexts (the client's read and write timeouts
// bound it), so one caller giving up cannot fail the others. A caller waiting on another's batch
// is answered with its context's error when it gives up, while its input is still applied if
// its batch runs, as a single call cut off after sending would be; the caller that sends a batch
// waits for it, within those timeouts.
type combiner[K comparable, In, Out any] struct {
	inFlight int
	run      func(ctx context.Context, key K, batch []In) ([]Out, error)

	mu    sync.Mutex
	lines map[K]*lineup[In, Out] // absent when the key has no call waiting or running
}

type lineup[In, Out any] struct {
	waiting []*combinedCall[In, Out]
	running int
}

type combinedCall[In, Out any] struct {
	in   In
	out  Out
	err  error
	done chan struct{}
}

func newCombiner[K comparable, In, Out any](inFlight int, run func(ctx context.Context, key K, batch []In) ([]Out, error)) *combiner[K, In, Out] {
	return &combiner[K, In, Out]{inFlight: inFlight, run: run, lines: make(map[K]*lineup[In, Out])}
}

// do runs in as part of a batch of key and answers its own result.
func (c *combiner[K, In, Out]) do(ctx context.Context, key K, in In) (Out, error) {
	call := &combinedCall[In, Out]{in: in, done: make(chan struct{})}
	c.mu.Lock()
	line := c.lines[key]
	if line == nil {
		line = &lineup[In, Out]{}
		c.lines[key] = line
	}
	line.waiting = append(line.waiting, call)
	var batch []*combinedCall[In, Out]
	if line.running < c.inFlight {
		line.running++
		batch = line.take()
	}
	c.mu.Unlock()
	if batch != nil {
		c.send(context.WithoutCancel(ctx), key, batch)
	}
	select {
	case <-call.done:
		return call.out, call.err
	case <-ctx.Done():
		var zero Out
		return zero, ctx.Err()
	}
}

// take removes the next batch from the waiting calls.
func (l *lineup[In, Out]) take() []*combinedCall[In, Out] {
	if len(l.waiting) <= maxCombined {
		batch := l.waiting
		l.waiting = nil
		return batch
	}
	batch := l.waiting[:maxCombined]
	l.waiting = slices.Clone(l.waiting[maxCombined:])
	return batch
}

// send runs batch and answers its calls. The calls that arrived meanwhile go out next, on a
// goroutine of their own, so the caller that started this run never serves other callers'
// batches after its own answer.
func (c *combiner[K, In, Out]) send(ctx context.Context, key K, batch []*combinedCall[In, Out]) {
	ins := make([]In, len(batch))
	for i, call := range batch {
		ins[i] = call.in
	}
	outs, err := c.runBatch(ctx, key, ins)
	for i, call := range batch {
		if err != nil {
			call.err = err
		} else {
			call.out = outs[i]
		}
		close(call.done)
	}

	c.mu.Lock()
	line := c.lines[key]
	var next, failed []*combinedCall[In, Out]
	switch {
	case len(line.waiting) > 0 && !errors.Is(err, ports.ErrUnavailable):
		next = line.take()
	default:
		failed, line.waiting = line.waiting, nil
		if line.running--; line.running == 0 {
			delete(c.lines, key)
		}
	}
	c.mu.Unlock()
	for _, call := range failed {
		call.err = err
		close(call.done)
	}
	if next != nil {
		go c.send(ctx, key, next)
	}
}

// runBatch calls run, turning a panic or an answer of the wrong length into the batch's error,
// so that every call is answered and the key's next batch still goes out.
func (c *combiner[K, In, Out]) runBatch(ctx context.Context, key K, ins []In) (outs []Out, err error) {
	defer func() {
		if r := recover(); r != nil {
			outs, err = nil, fmt.Errorf("redis: combined call panicked: %v", r)
		}
	}()
	outs, err = c.run(ctx, key, ins)
	if err == nil && len(outs) != len(ins) {
		return nil, fmt.Errorf("redis: combined call answered %d of %d calls", len(outs), len(ins))
	}
	return outs, err
}
