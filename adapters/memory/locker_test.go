package memory_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/ports"
)

const lockTTL = time.Second

func TestLocker_HeldKeyIsNotAcquiredUntilReleased(t *testing.T) {
	t.Parallel()
	locker := memory.NewLocker(newFakeClock())
	ctx := context.Background()

	lock, err := locker.TryAcquire(ctx, "crew:1", lockTTL)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if _, err := locker.TryAcquire(ctx, "crew:1", lockTTL); !errors.Is(err, ports.ErrLockNotAcquired) {
		t.Fatalf("second TryAcquire = %v, want ports.ErrLockNotAcquired", err)
	}
	if _, err := locker.TryAcquire(ctx, "crew:2", lockTTL); err != nil {
		t.Fatalf("another key: %v", err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := lock.Release(ctx); !errors.Is(err, ports.ErrLockNotHeld) {
		t.Errorf("second Release = %v, want ports.ErrLockNotHeld", err)
	}
	if _, err := locker.TryAcquire(ctx, "crew:1", lockTTL); err != nil {
		t.Fatalf("TryAcquire after Release: %v", err)
	}
}

func TestLocker_ExpiredLockIsTakenAndTheOldOwnerCannotReleaseIt(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	locker := memory.NewLocker(clock)
	ctx := context.Background()

	stale, err := locker.TryAcquire(ctx, "crew:1", lockTTL)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	clock.Advance(lockTTL)
	current, err := locker.TryAcquire(ctx, "crew:1", lockTTL)
	if err != nil {
		t.Fatalf("TryAcquire after expiry: %v", err)
	}
	if err := stale.Release(ctx); !errors.Is(err, ports.ErrLockNotHeld) {
		t.Fatalf("stale Release = %v, want ports.ErrLockNotHeld", err)
	}
	if _, err := locker.TryAcquire(ctx, "crew:1", lockTTL); !errors.Is(err, ports.ErrLockNotAcquired) {
		t.Fatalf("the stale Release freed the new owner's lock: TryAcquire = %v", err)
	}
	if err := current.Release(ctx); err != nil {
		t.Fatalf("current Release: %v", err)
	}
}

func TestLocker_ReleaseAfterExpiryIsNotHeld(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	locker := memory.NewLocker(clock)
	lock, err := locker.TryAcquire(context.Background(), "crew:1", lockTTL)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	clock.Advance(2 * lockTTL)
	if err := lock.Release(context.Background()); !errors.Is(err, ports.ErrLockNotHeld) {
		t.Errorf("Release after expiry = %v, want ports.ErrLockNotHeld", err)
	}
}

func TestLocker_OneWinnerAmongConcurrentCallers(t *testing.T) {
	t.Parallel()
	locker := memory.NewLocker(newFakeClock())
	var winners atomic.Int32
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			_, err := locker.TryAcquire(context.Background(), "crew:1", lockTTL)
			switch {
			case err == nil:
				winners.Add(1)
			case !errors.Is(err, ports.ErrLockNotAcquired):
				t.Errorf("TryAcquire: %v", err)
			}
		})
	}
	wg.Wait()
	if n := winners.Load(); n != 1 {
		t.Errorf("%d winners, want 1", n)
	}
}
