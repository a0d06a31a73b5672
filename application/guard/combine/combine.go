// Package combine combines concurrent calls that share a key into batches: calls of one key
// line up in arrival order, and whichever call's turn it is sends the ones waiting behind it
// together, in one call of a batch function, then gives each its own answer. A crowd on one
// key then costs one round trip (one transaction, one script call) per batch instead of one per
// caller. It is the engine under the guard's lane (a lock per batch, idempotency) and the Redis
// waiting room's combined scripts.
package combine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/rushgate/rushgate/ports"
)

// Answer is one call's result from a batch: its value, or the error that answers that call
// alone (a business rejection such as crew.ErrFull).
type Answer[Out any] struct {
	Value Out
	Err   error
}

// Func serves one batch of calls that share key, in arrival order, and returns one answer per
// call, in order. An error instead answers every call of the batch. An error wrapping
// ports.ErrUnavailable (a dependency did not answer) also answers every call still waiting on
// the key, at once: sent next, they would only wait for the same dependency. Such an error may
// come with one answer per call (some were served before the dependency went away): those then
// answer the batch, and the error only the calls waiting behind it.
type Func[K comparable, In, Out any] func(ctx context.Context, key K, batch []In) ([]Answer[Out], error)

// Gate guards each batch of a key, as the guard's lane takes a distributed lock for it. It runs
// on the goroutine of the call whose turn it is, before the batch is taken, so the calls that
// arrive while it waits join the batch; first is that call's input. An error answers that call
// alone (and, wrapping ports.ErrUnavailable, every call waiting on the key); the next call then
// takes its turn. release runs once the batch's other calls are answered, before the next turn;
// an error from it wrapping ports.ErrUnavailable answers every call waiting on the key.
type Gate[K comparable, In any] func(ctx context.Context, key K, first In) (release func() error, err error)

// Config tunes a Combiner.
type Config[K comparable, In any] struct {
	// MaxBatch bounds how many calls one batch serves; 1 turns combining off. It must be
	// positive.
	MaxBatch int
	// InFlight is how many batches of one key may be out at once (1 when zero): with one, a
	// dependency and the caller take turns, each idle while the other works on the batch. Runs
	// in flight together may reach the dependency in either order: the order of calls is kept
	// within a batch, not across batches.
	InFlight int
	// Gate, when set, guards each batch.
	Gate Gate[K, In]
	// Queued, when set, hears each call joining key's line, which then holds length calls
	// (those whose batch is out included).
	Queued func(key K, length int)
	// Timeout, when positive, bounds each call from its arrival: its wait in line, the gate and
	// its batch together, as a dependency's timeout bounds one request. A turn's gate and batch
	// run until the deadline of the call whose turn it is, the earliest of the batch; every batch
	// ahead of a waiting call ends by the deadline of calls that arrived before it, so the
	// waiting call needs no timer of its own. The batch function must end at its context's
	// deadline (a store's calls do), answering with an error wrapping ports.ErrUnavailable,
	// which then answers the calls waiting behind it too.
	Timeout time.Duration
}

// Combiner lines calls up per key and serves them in batches.
//
// A call whose turn it is sends the batch on its own goroutine, detached from its context, so
// one caller giving up cannot fail the others; the batch function's own timeouts bound it. A
// call still waiting for a batch leaves when its context ends, answered with the context's
// error and never sent; a call taken into a batch waits for that batch's answer.
type Combiner[K comparable, In, Out any] struct {
	cfg   Config[K, In]
	serve Func[K, In, Out]

	mu    sync.Mutex
	lines map[K]*line[In, Out] // absent when the key holds no call
}

// New returns a Combiner serving batches with serve. It panics when cfg.MaxBatch is not
// positive: that is a wiring mistake, not a call's failure.
func New[K comparable, In, Out any](cfg Config[K, In], serve Func[K, In, Out]) *Combiner[K, In, Out] {
	if cfg.MaxBatch <= 0 {
		panic("combine: Config.MaxBatch must be positive")
	}
	if cfg.InFlight <= 0 {
		cfg.InFlight = 1
	}
	return &Combiner[K, In, Out]{cfg: cfg, serve: serve, lines: make(map[K]*line[In, Out])}
}

// line is one key's calls. Its fields are guarded by Combiner.mu.
type line[In, Out any] struct {
	waiting []*call[In, Out] // in arrival order
	turns   int              // calls whose turn it is, gating or sending a batch: at most InFlight
	held    int              // calls not yet done: waiting, taking their turn, or in a batch out
}

type state int

const (
	waiting state = iota // in line.waiting
	turn                 // its turn: gates and sends a batch
	sent                 // in a batch another call sends
	served               // answer is set
)

// call is one Do. state and answer are guarded by Combiner.mu.
type call[In, Out any] struct {
	in       In
	deadline time.Time // its arrival + Config.Timeout; zero without one
	state    state
	wake     chan struct{} // signalled when its turn comes or it is served
	answer   Answer[Out]
}

func (c *call[In, Out]) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Do lines in up behind key and returns its answer from the batch that served it.
func (c *Combiner[K, In, Out]) Do(ctx context.Context, key K, in In) (Out, error) {
	me := &call[In, Out]{in: in, wake: make(chan struct{}, 1)}
	if c.cfg.Timeout > 0 {
		me.deadline = time.Now().Add(c.cfg.Timeout)
	}
	c.mu.Lock()
	l := c.lines[key]
	if l == nil {
		l = &line[In, Out]{}
		c.lines[key] = l
	}
	l.held++
	length := l.held
	if l.turns < c.cfg.InFlight {
		l.turns++
		me.state = turn
	} else {
		l.waiting = append(l.waiting, me)
	}
	c.mu.Unlock()
	if c.cfg.Queued != nil {
		c.cfg.Queued(key, length)
	}

	for {
		c.mu.Lock()
		st := me.state
		c.mu.Unlock()
		switch st {
		case turn:
			a := c.send(ctx, key, l, me)
			return a.Value, a.Err
		case served:
			return me.answer.Value, me.answer.Err
		case sent:
			// The batch answers several callers, so it runs to its end whatever this one does.
			<-me.wake
			continue
		}
		select {
		case <-me.wake:
		case <-ctx.Done():
			if c.leave(key, l, me) {
				var zero Out
				return zero, fmt.Errorf("combine: left the line: %w", ctx.Err())
			}
		}
	}
}

// leave takes a call that is still only waiting out of its line; it reports false when the
// call's turn came or it was sent meanwhile.
func (c *Combiner[K, In, Out]) leave(key K, l *line[In, Out], me *call[In, Out]) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if me.state != waiting {
		return false
	}
	l.waiting = slices.DeleteFunc(l.waiting, func(w *call[In, Out]) bool { return w == me })
	c.doneLocked(key, l, 1)
	return true
}

// send takes me's turn: it passes the gate, sends me and the calls waiting behind it as one
// batch, answers them, releases the gate and hands the turn on. It returns me's own answer.
func (c *Combiner[K, In, Out]) send(ctx context.Context, key K, l *line[In, Out], me *call[In, Out]) Answer[Out] {
	release := func() error { return nil }
	if c.cfg.Gate != nil {
		// What the gate takes (a lock) may use its context until released.
		gateCtx, cancel := me.bound(ctx)
		defer cancel()
		var err error
		if release, err = c.cfg.Gate(gateCtx, key, me.in); err != nil {
			c.mu.Lock()
			c.failWaitingLocked(key, l, err)
			c.endTurnLocked(key, l, 1)
			c.mu.Unlock()
			return Answer[Out]{Err: err}
		}
	}

	c.mu.Lock()
	taken := min(len(l.waiting), c.cfg.MaxBatch-1)
	batch := append([]*call[In, Out]{me}, l.waiting[:taken]...)
	l.waiting = slices.Delete(l.waiting, 0, taken)
	for _, b := range batch[1:] {
		b.state = sent
	}
	c.mu.Unlock()

	runCtx, cancel := me.bound(context.WithoutCancel(ctx))
	answers, err := c.run(runCtx, key, batch)
	cancel()
	// The batch is answered before the gate is released, so no answer waits on the release.
	c.mu.Lock()
	for i, b := range batch[1:] {
		b.answer, b.state = answers[i+1], served
		b.signal()
	}
	c.failWaitingLocked(key, l, err)
	c.mu.Unlock()

	releaseErr := release()
	c.mu.Lock()
	c.failWaitingLocked(key, l, releaseErr)
	c.endTurnLocked(key, l, len(batch))
	c.mu.Unlock()
	return answers[0]
}

// bound is ctx until the call's deadline, when it has one.
func (c *call[In, Out]) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.deadline.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, c.deadline)
}

// run calls the batch function for batch and returns one answer per call, and the function's
// error.
func (c *Combiner[K, In, Out]) run(ctx context.Context, key K, batch []*call[In, Out]) ([]Answer[Out], error) {
	ins := make([]In, len(batch))
	for i, b := range batch {
		ins[i] = b.in
	}
	answers, err := Safely(func() ([]Answer[Out], error) { return c.serve(ctx, key, ins) })
	if err == nil && len(answers) != len(ins) {
		err = fmt.Errorf("combine: the batch function answered %d of %d calls", len(answers), len(ins))
	}
	if len(answers) != len(ins) {
		answers = make([]Answer[Out], len(ins))
		for i := range answers {
			answers[i].Err = err
		}
	}
	return answers, err
}

// failWaitingLocked answers every call of l still waiting with err, at once, when err wraps
// ports.ErrUnavailable.
func (c *Combiner[K, In, Out]) failWaitingLocked(key K, l *line[In, Out], err error) {
	if !errors.Is(err, ports.ErrUnavailable) {
		return
	}
	for _, w := range l.waiting {
		w.answer, w.state = Answer[Out]{Err: err}, served
		w.signal()
	}
	failed := len(l.waiting)
	l.waiting = nil
	c.doneLocked(key, l, failed)
}

// endTurnLocked ends a turn that served n calls and gives it to the next waiting call.
func (c *Combiner[K, In, Out]) endTurnLocked(key K, l *line[In, Out], n int) {
	l.turns--
	if len(l.waiting) > 0 {
		next := l.waiting[0]
		l.waiting = slices.Delete(l.waiting, 0, 1)
		l.turns++
		next.state = turn
		next.signal()
	}
	c.doneLocked(key, l, n)
}

// doneLocked counts n calls of l as done and forgets the line once it holds none.
func (c *Combiner[K, In, Out]) doneLocked(key K, l *line[In, Out], n int) {
	if l.held -= n; l.held == 0 {
		delete(c.lines, key)
	}
}

// ErrPanicked marks the error of a batch function that panicked.
var ErrPanicked = errors.New("combine: the batch function panicked")

// Safely calls f and turns a panic in it into an error wrapping ErrPanicked, with the panic's
// value and stack, so a batch that panics answers its calls with that error instead of taking
// the process down, and the key's next batch still goes out.
func Safely[T any](f func() (T, error)) (value T, err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero T
			value, err = zero, fmt.Errorf("%w: %v\n%s", ErrPanicked, r, debug.Stack())
		}
	}()
	return f()
}
