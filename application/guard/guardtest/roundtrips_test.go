package guardtest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/application/guard/guardtest"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

// stuckStore is an idempotency store whose Delete is still on the wire until unstuck.
type stuckStore struct {
	ports.IdempotencyStore
	unstuck chan struct{}
}

func (s stuckStore) Delete(context.Context, ports.IdempotencyKey, string) error {
	<-s.unstuck
	return nil
}

// A call an earlier request still has in flight at Reset (its last call, answered late on a busy
// machine) does not make the next request's calls one wait: they are counted on their own.
func TestRoundTrips_ACallInFlightAtResetJoinsNoWaitAfterIt(t *testing.T) {
	ctx := context.Background()
	clock := system.Clock{}
	trips := guardtest.NewRoundTrips(20 * time.Millisecond)
	stuck := stuckStore{IdempotencyStore: memory.NewIdempotencyStore(clock), unstuck: make(chan struct{})}
	earlier := make(chan struct{})
	go func() {
		defer close(earlier)
		_ = trips.Store(stuck).Delete(ctx, ports.IdempotencyKey{Scope: "s", Key: "earlier"}, "t")
	}()
	t.Cleanup(func() { close(stuck.unstuck); <-earlier })
	testkit.Eventually(t, 10*time.Second, "the earlier call started", func() error {
		if len(trips.Waits()) == 0 {
			return errors.New("no call yet")
		}
		return nil
	})
	trips.Reset()

	store, locker := trips.Store(memory.NewIdempotencyStore(clock)), trips.Locker(memory.NewLocker(clock))
	var both sync.WaitGroup
	both.Go(func() {
		if _, err := store.Begin(ctx, ports.IdempotencyKey{Scope: "s", Key: "k"}, "f", time.Minute, time.Minute); err != nil {
			t.Error(err)
		}
	})
	both.Go(func() {
		if _, err := locker.TryAcquire(ctx, "first", time.Minute); err != nil {
			t.Error(err)
		}
	})
	both.Wait()
	if _, err := locker.TryAcquire(ctx, "second", time.Minute); err != nil {
		t.Fatal(err)
	}

	if got, want := fmt.Sprint(trips.Waits()), "[acquire+begin acquire]"; got != want {
		t.Fatalf("waits %s, want %s", got, want)
	}
}
