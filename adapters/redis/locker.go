package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/ports"
)

// lockKeyPrefix namespaces lock keys in a Redis shared with other data.
const lockKeyPrefix = "rushgate:lock:"

// acquireBudgetFactor bounds one TryAcquire, including the cleanup DEL redsync sends after a
// failed attempt, to half the lock's TTL (and each command to the client's timeouts). redsync's
// default per-attempt timeout (5%, 50 ms at a 1 s TTL) is meant for quorums over many nodes;
// against one Redis it turns ordinary scheduling delays under load into ErrUnavailable. Half
// the TTL still leaves the winner most of its lease.
const acquireBudgetFactor = 0.5

var (
	_ ports.Locker = (*Locker)(nil)
	_ ports.Lock   = (*lock)(nil)
)

// Locker is a ports.Locker on one Redis (or one Sentinel/Cluster deployment) via go-redsync.
// It is safe for concurrent use.
type Locker struct {
	redsync *redsync.Redsync
}

// NewLocker returns a Locker that keeps its locks in c under "rushgate:lock:<key>".
func NewLocker(c goredis.UniversalClient) *Locker {
	return &Locker{redsync: redsync.New(redsyncgoredis.NewPool(c))}
}

// TryAcquire makes one attempt to lock key for ttl. It returns ports.ErrLockNotAcquired when
// another owner holds the key or the attempt outlasted half the TTL, and an error wrapping
// ports.ErrUnavailable when Redis cannot be reached.
func (l *Locker) TryAcquire(ctx context.Context, key string, ttl time.Duration) (ports.Lock, error) {
	if ttl < time.Millisecond {
		// SET PX takes whole milliseconds, and go-redis reads a zero TTL as "never expires".
		return nil, fmt.Errorf("redis: lock %q: ttl %v must be at least 1ms", key, ttl)
	}
	// redsync derives the cleanup's timeout afresh from ctx; a deadline on ctx itself keeps a
	// silent server from costing the budget twice.
	caller := ctx
	ctx, cancel := context.WithTimeout(ctx, time.Duration(float64(ttl)*acquireBudgetFactor))
	defer cancel()
	mutex := l.redsync.NewMutex(lockKeyPrefix+key,
		redsync.WithExpiry(ttl),
		redsync.WithTries(1),
		redsync.WithTimeoutFactor(acquireBudgetFactor),
	)
	err := mutex.TryLockContext(ctx)
	var taken *redsync.ErrTaken
	switch {
	case err == nil:
		return &lock{mutex: mutex}, nil
	case errors.As(err, &taken), errors.Is(err, redsync.ErrFailed):
		// ErrFailed without a Redis error: the SET succeeded too late to leave any validity,
		// and redsync already deleted it again. Either way the key is not ours.
		return nil, fmt.Errorf("redis: lock %q: %w", key, ports.ErrLockNotAcquired)
	case isTimeout(err) && caller.Err() == nil:
		// The attempt outlived its own budget, not the request: on an overloaded host that is
		// contention, so the guard backs off. A stopped Redis refuses at once, and a silent one
		// has already failed the idempotency Begin that precedes every lock.
		return nil, fmt.Errorf("redis: lock %q: %w: %w", key, ports.ErrLockNotAcquired, err)
	default:
		return nil, unavailable(fmt.Sprintf("lock %q", key), err)
	}
}

func isTimeout(err error) bool {
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout()
}

// lock is one acquired redsync mutex.
type lock struct {
	mutex *redsync.Mutex
}

// Release deletes the lock only if it still holds this owner's value. It returns
// ports.ErrLockNotHeld when the TTL expired or another owner holds the key.
func (l *lock) Release(ctx context.Context) error {
	released, err := l.mutex.UnlockContext(ctx)
	var taken *redsync.ErrTaken
	switch {
	case released:
		return nil
	case err == nil, errors.As(err, &taken), errors.Is(err, redsync.ErrLockAlreadyExpired):
		return fmt.Errorf("redis: unlock %q: %w", l.mutex.Name(), ports.ErrLockNotHeld)
	default:
		return unavailable(fmt.Sprintf("unlock %q", l.mutex.Name()), err)
	}
}
