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
	"github.com/rushgate/rushgate/test/testkit"
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
	testkit.StartTogether(100, func(int) {
		_, err := locker.TryAcquire(context.Background(), "crew:1", lockTTL)
		switch {
		case err == nil:
			winners.Add(1)
		case !errors.Is(err, ports.ErrLockNotAcquired):
			t.Errorf("TryAcquire: %v", err)
		}
	})
	if n := winners.Load(); n != 1 {
		t.Errorf("%d winners, want 1", n)
	}
}

// notified reports whether released has been closed, without waiting: Release closes it before
// returning.
func notified(released <-chan struct{}) bool {
	select {
	case <-released:
		return true
	default:
		return false
	}
}

func TestLocker_ReleasedNotifiesOnlyAReleaseByTheOwner(t *testing.T) {
	cases := map[string]struct {
		// act runs between Released("crew:1") and the check, with the lock acquired before.
		act          func(t *testing.T, clock *memory.Clock, locker *memory.Locker, lock ports.Lock, stop func())
		wantNotified bool
	}{
		"release by the owner": {
			act: func(t *testing.T, _ *memory.Clock, _ *memory.Locker, lock ports.Lock, _ func()) {
				if err := lock.Release(context.Background()); err != nil {
					t.Fatalf("Release: %v", err)
				}
			},
			wantNotified: true,
		},
		"stop, then release": {
			act: func(t *testing.T, _ *memory.Clock, _ *memory.Locker, lock ports.Lock, stop func()) {
				stop()
				if err := lock.Release(context.Background()); err != nil {
					t.Fatalf("Release: %v", err)
				}
			},
		},
		"release of another key": {
			act: func(t *testing.T, _ *memory.Clock, locker *memory.Locker, _ ports.Lock, _ func()) {
				other, err := locker.TryAcquire(context.Background(), "crew:2", lockTTL)
				if err != nil {
					t.Fatalf("TryAcquire: %v", err)
				}
				if err := other.Release(context.Background()); err != nil {
					t.Fatalf("Release: %v", err)
				}
			},
		},
		"failed release after the TTL expired and another owner took the key": {
			act: func(t *testing.T, clock *memory.Clock, locker *memory.Locker, lock ports.Lock, _ func()) {
				clock.Advance(lockTTL)
				if _, err := locker.TryAcquire(context.Background(), "crew:1", lockTTL); err != nil {
					t.Fatalf("TryAcquire after expiry: %v", err)
				}
				if err := lock.Release(context.Background()); !errors.Is(err, ports.ErrLockNotHeld) {
					t.Fatalf("stale Release = %v, want ports.ErrLockNotHeld", err)
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock()
			locker := memory.NewLocker(clock)
			lock, err := locker.TryAcquire(context.Background(), "crew:1", lockTTL)
			if err != nil {
				t.Fatalf("TryAcquire: %v", err)
			}
			released, stop := locker.Released("crew:1")
			tc.act(t, clock, locker, lock, stop)
			if got := notified(released); got != tc.wantNotified {
				t.Errorf("notified = %v, want %v", got, tc.wantNotified)
			}
			stop()
			if n := memory.ReleaseListeners(locker, "crew:1"); n != 0 {
				t.Errorf("%d listeners left after stop", n)
			}
		})
	}
}

// acquireAndRelease takes key and releases it at once.
func acquireAndRelease(t *testing.T, locker *memory.Locker, key string) {
	t.Helper()
	lock, err := locker.TryAcquire(context.Background(), key, lockTTL)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := lock.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func TestLocker_ReleasedNotifiesEveryListenerOnceAndOnlyForTheNextRelease(t *testing.T) {
	t.Parallel()
	locker := memory.NewLocker(newFakeClock())
	release := func() { acquireAndRelease(t, locker, "crew:1") }

	release() // before anyone asked: no notice is kept for later listeners.
	first, stopFirst := locker.Released("crew:1")
	second, stopSecond := locker.Released("crew:1")
	defer stopSecond()
	if notified(first) || notified(second) {
		t.Fatal("a release before Released was notified")
	}
	release()
	if !notified(first) || !notified(second) {
		t.Fatal("a listener missed the release")
	}
	stopFirst() // after the notice: harmless, and leaves later listeners alone.
	later, stopLater := locker.Released("crew:1")
	defer stopLater()
	stopFirst()
	release()
	if !notified(later) {
		t.Error("a stale stop unregistered a later listener")
	}
	if n := memory.ReleaseListeners(locker, "crew:1"); n != 0 {
		t.Errorf("%d listeners kept after the release", n)
	}
}

// Listeners register, stop and are notified while the key is acquired and released from other
// goroutines: every listener registered before a release hears it, and none is left behind.
func TestLocker_ReleasedIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	const listeners = 50
	locker := memory.NewLocker(newFakeClock())
	ctx := context.Background()

	var registered, done sync.WaitGroup
	proceed := make(chan struct{})
	registered.Add(listeners)
	for i := range listeners {
		done.Go(func() {
			released, stop := locker.Released("crew:1")
			defer stop()
			registered.Done()
			if i%2 == 0 {
				stop() // races with the releases below
				return
			}
			<-released
		})
	}
	// Churn: locks taken and released while listeners come and go.
	var churn sync.WaitGroup
	churn.Go(func() {
		for {
			select {
			case <-proceed:
				return
			default:
			}
			if lock, err := locker.TryAcquire(ctx, "crew:1", lockTTL); err == nil {
				if err := lock.Release(ctx); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		}
	})
	registered.Wait()
	close(proceed)
	churn.Wait()
	// The last release may have run before the final listener registered.
	acquireAndRelease(t, locker, "crew:1")
	done.Wait()
	if n := memory.ReleaseListeners(locker, "crew:1"); n != 0 {
		t.Errorf("%d listeners left", n)
	}
}
