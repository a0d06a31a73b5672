package guard_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/guard/guardtest"
	"github.com/rushgate/rushgate/ports"
)

// leavingHeadLocker's first TryAcquire lasts until its caller's context ends and then fails as
// the Redis adapter does, with ErrUnavailable around the context's error; later ones pass.
type leavingHeadLocker struct {
	ports.Locker
	first chan struct{} // closed by the first TryAcquire once it waits
}

func (l *leavingHeadLocker) TryAcquire(ctx context.Context, key string, ttl time.Duration) (ports.Lock, error) {
	select {
	case <-l.first:
		return l.Locker.TryAcquire(ctx, key, ttl)
	default:
		close(l.first)
	}
	<-ctx.Done()
	return nil, fmt.Errorf("redis: lock %q: %w: %w", key, ports.ErrUnavailable, ctx.Err())
}

// heldBegins holds Begin of one key until release is closed.
type heldBegins struct {
	ports.IdempotencyStore
	key     string
	release chan struct{}
}

func (s heldBegins) Begin(ctx context.Context, key ports.IdempotencyKey, fingerprint string, lease, ttl time.Duration) (ports.BeginResult, error) {
	if key.Key == s.key {
		<-s.release
	}
	return s.IdempotencyStore.Begin(ctx, key, fingerprint, lease, ttl)
}

func TestLane_AHeadWhoseKeyIsRefusedWhileItTakesTheLockHandsItsLineOn(t *testing.T) {
	f := newFixture(t)
	inProgress := request(key(0))
	if _, err := f.store.Begin(context.Background(), ports.IdempotencyKey{Scope: inProgress.UserID, Key: inProgress.IdempotencyKey},
		inProgress.Fingerprint, time.Hour, time.Hour); err != nil {
		t.Fatal(err)
	}
	locker := &leavingHeadLocker{Locker: f.locker, first: make(chan struct{})}
	store := heldBegins{IdempotencyStore: f.store, key: inProgress.IdempotencyKey, release: make(chan struct{})}
	deps := f.deps()
	deps.Locker, deps.Idempotency, deps.Sleeper = locker, store, guardtest.Parked{}
	r := &recorder{}
	lane := guard.NewLane(newGuard(deps, guard.Config{}, guard.WithObserver(f.queues)), guard.LaneConfig{Markers: true}, r.serve)

	head := f.enqueue(t, context.Background(), func(ctx context.Context) (guard.Result[answer], error) {
		return lane.Run(ctx, inProgress, 0)
	})
	<-locker.first // the head is taking the lock
	behind := f.enqueue(t, context.Background(), func(ctx context.Context) (guard.Result[answer], error) {
		return lane.Run(ctx, request(key(1)), 1)
	})
	close(store.release) // the head hears its key is in progress and leaves, mid-acquire
	if o := await(t, head); !errors.Is(o.err, guard.ErrInProgress) {
		t.Fatalf("the head with a key in progress: %+v, %v", o.res, o.err)
	}
	if o := await(t, behind); o.err != nil || o.res.Value.N != 1 {
		t.Fatalf("the request behind a head that left: %+v, %v; want it served, not failed with the head's cancelled lock", o.res, o.err)
	}
}
