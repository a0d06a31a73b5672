package redis

import (
	"context"
	"slices"
	"sync"
)

// maxCombined bounds one combined script call: long enough to carry a crowd's burst in one
// round trip, short enough that the script never blocks Redis for long (~100 µs).
const maxCombined = 128

// combiner merges concurrent calls that share a key (an event) into one call of run with all
// their inputs, in arrival order. A key has at most one run in flight; calls that arrive
// meanwhile go out together in the next. A crowd entering one event then costs Redis one
// script call per batch instead of one per user, and the server one round trip — the same
// combining the guard does for SQL. An idle key runs a caller's call at once, alone.
//
// A batch runs detached from its callers' contexts (the client's read and write timeouts
// bound it), so one caller giving up cannot fail the others; that caller is answered with its
// context's error while its input may still be applied, as a single call cut off after
// sending would be.
type combiner[K comparable, In, Out any] struct {
	run func(ctx context.Context, key K, batch []In) ([]Out, error)

	mu    sync.Mutex
	lines map[K][]*combinedCall[In, Out] // key → calls not yet sent; absent when none run
}

type combinedCall[In, Out any] struct {
	in   In
	out  Out
	err  error
	done chan struct{}
}

func newCombiner[K comparable, In, Out any](run func(ctx context.Context, key K, batch []In) ([]Out, error)) *combiner[K, In, Out] {
	return &combiner[K, In, Out]{run: run, lines: make(map[K][]*combinedCall[In, Out])}
}

// do runs in as part of the next batch of key and answers its own result.
func (c *combiner[K, In, Out]) do(ctx context.Context, key K, in In) (Out, error) {
	call := &combinedCall[In, Out]{in: in, done: make(chan struct{})}
	c.mu.Lock()
	line, running := c.lines[key]
	c.lines[key] = append(line, call)
	c.mu.Unlock()
	if !running {
		c.send(context.WithoutCancel(ctx), key, c.next(key))
	}
	select {
	case <-call.done:
		return call.out, call.err
	case <-ctx.Done():
		var zero Out
		return zero, ctx.Err()
	}
}

// next takes key's next batch, or retires the key when no call waits.
func (c *combiner[K, In, Out]) next(key K) []*combinedCall[In, Out] {
	c.mu.Lock()
	defer c.mu.Unlock()
	line := c.lines[key]
	if len(line) == 0 {
		delete(c.lines, key)
		return nil
	}
	if len(line) <= maxCombined {
		c.lines[key] = nil // present: a batch is in flight
		return line
	}
	c.lines[key] = slices.Clone(line[maxCombined:])
	return line[:maxCombined]
}

// send runs batch and answers its calls. The next batch of key goes out on a goroutine of its
// own, so the caller that found the key idle never serves other callers' batches after its own.
func (c *combiner[K, In, Out]) send(ctx context.Context, key K, batch []*combinedCall[In, Out]) {
	ins := make([]In, len(batch))
	for i, call := range batch {
		ins[i] = call.in
	}
	outs, err := c.run(ctx, key, ins)
	for i, call := range batch {
		if err != nil {
			call.err = err
		} else {
			call.out = outs[i]
		}
		close(call.done)
	}
	if more := c.next(key); more != nil {
		go c.send(ctx, key, more)
	}
}
