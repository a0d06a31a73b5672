package ports

import (
	"context"
	"errors"
	"time"
)

var (
	// ErrLockNotAcquired means another holder owns the key right now; retrying later may work.
	ErrLockNotAcquired = errors.New("lock held by another owner")
	// ErrLockNotHeld means the caller no longer owns the lock: its TTL expired or another owner
	// took it.
	ErrLockNotHeld = errors.New("lock not held")
)

// Locker is a distributed mutual-exclusion lock with a TTL.
//
// TryAcquire makes one attempt without waiting: it returns a Lock when the key was free (or its
// previous holder's TTL had expired), ErrLockNotAcquired when another owner holds it, and an
// error wrapping ErrUnavailable when the backing store refuses, fails the connection or does not
// answer within its timeout. A lock expires by itself after ttl, so a crashed holder never
// blocks the key for longer than that.
//
// Released returns a channel that is closed once key is released, after the call, by a holder in
// this process, or in another sharing the locks once a TryAcquire of the key here found it held
// (releases nobody waited for need not be announced); call stop when no longer interested. It is
// a hint for waking a waiter early, not a guarantee: a notice may come late or never (a holder
// that dies frees the key by TTL, silently), so waiters still bound their waits.
type Locker interface {
	TryAcquire(ctx context.Context, key string, ttl time.Duration) (Lock, error)
	Released(key string) (released <-chan struct{}, stop func())
}

// Lock is one acquired lock. Release frees it only if the caller still owns it: after the TTL
// expired or another owner took the key, Release returns ErrLockNotHeld and leaves the other
// owner's lock alone.
type Lock interface {
	Release(ctx context.Context) error
}
