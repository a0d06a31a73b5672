package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.Locker = (*Locker)(nil)
	_ ports.Lock   = (*lock)(nil)
)

// Locker is a TTL lock table, like the Redis lock: a key is held until its owner releases it or
// its TTL, measured on the clock, runs out.
type Locker struct {
	clock ports.Clock

	mu   sync.Mutex
	held *expiringMap[string, *lock] // key → its current owner
}

// NewLocker returns a Locker whose TTLs run on clock.
func NewLocker(clock ports.Clock) *Locker {
	return &Locker{clock: clock, held: newExpiringMap[string, *lock]()}
}

// TryAcquire takes key for ttl if it is free or its holder's TTL has expired, and returns
// ports.ErrLockNotAcquired otherwise. It never waits.
func (l *Locker) TryAcquire(_ context.Context, key string, ttl time.Duration) (ports.Lock, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("memory: lock %q: ttl %v must be positive", key, ttl)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	if _, taken := l.held.get(key, now); taken {
		return nil, ports.ErrLockNotAcquired
	}
	acquired := &lock{locker: l, key: key}
	l.held.set(key, acquired, now.Add(ttl), now)
	return acquired, nil
}

// lock is one acquisition; its identity is the owner token.
type lock struct {
	locker *Locker
	key    string
}

// Release frees the key if this acquisition still holds it, and returns ports.ErrLockNotHeld
// after its TTL expired or another owner took the key.
func (k *lock) Release(context.Context) error {
	l := k.locker
	l.mu.Lock()
	defer l.mu.Unlock()
	if owner, held := l.held.get(k.key, l.clock.Now()); !held || owner != k {
		return fmt.Errorf("memory: release %q: %w", k.key, ports.ErrLockNotHeld)
	}
	l.held.delete(k.key)
	return nil
}
