package redis

import (
	"context"
	"runtime"
	"time"

	"github.com/rushgate/rushgate/application/guard/combine"
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
// into one call of run with all their inputs, in arrival order: the guard's combining engine
// (combine.Combiner) without what the lane adds for SQL (a lock per batch, idempotency, the
// one-by-one fallback). A crowd entering one event then costs Redis one script call per batch
// instead of one per user, and the server one round trip; a key with a free run sends a
// caller's call at once. A run that fails with ports.ErrUnavailable (Redis did not answer)
// answers the calls queued behind it with the same error at once.
type combiner[K comparable, In, Out any] struct {
	calls *combine.Combiner[K, In, Out]
}

// timeout, when positive, bounds each call from its arrival, its wait for a script call
// included (combine.Config.Timeout).
func newCombiner[K comparable, In, Out any](inFlight int, timeout time.Duration, run func(ctx context.Context, key K, batch []In) ([]Out, error)) *combiner[K, In, Out] {
	cfg := combine.Config[K, In]{MaxBatch: maxCombined, InFlight: inFlight, Timeout: timeout, Gate: yieldFirst[K, In]}
	return &combiner[K, In, Out]{calls: combine.New(cfg, func(ctx context.Context, key K, batch []In) ([]combine.Answer[Out], error) {
		outs, err := run(ctx, key, batch)
		if err != nil {
			return nil, err
		}
		answers := make([]combine.Answer[Out], len(outs))
		for i, out := range outs {
			answers[i].Value = out
		}
		return answers, nil
	})}
}

// yieldFirst is the gate of every batch: the goroutines ready to run go first. On a busy server
// they are requests on their way to the line, and a batch that takes them saves each its own
// script call — a round trip, Redis woken once more, and the system calls on both sides, which
// an entry's cost beside a bare request was mostly made of while arrivals trickled in one by
// one and each went out alone. With nothing else ready the batch goes at once.
func yieldFirst[K comparable, In any](context.Context, K, In) (func() error, error) {
	runtime.Gosched()
	return releaseNothing, nil
}

func releaseNothing() error { return nil }

// do runs in as part of a batch of key and answers its own result.
func (c *combiner[K, In, Out]) do(ctx context.Context, key K, in In) (Out, error) {
	return c.calls.Do(ctx, key, in)
}
