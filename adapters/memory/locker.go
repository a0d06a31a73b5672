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
	// listeners holds, per key, the channels of Released callers that have not been notified
	// or stopped yet.
	listeners map[string]map[chan struct{}]struct{}
}

// NewLocker returns a Locker whose TTLs run on clock.
func NewLocker(clock ports.Clock) *Locker {
	return &Locker{
		clock:     clock,
		held:      newExpiringMap[string, *lock](),
		listeners: make(map[string]map[chan struct{}]struct{}),
	}
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

// Released returns a channel closed by the next successful Release of key; stop unregisters
// it, and may be called more than once. A lock whose TTL runs out frees the key without a
// notice, which the port allows.
func (l *Locker) Released(key string) (<-chan struct{}, func()) {
	released := make(chan struct{})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.listeners[key] == nil {
		l.listeners[key] = make(map[chan struct{}]struct{})
	}
	l.listeners[key][released] = struct{}{}
	stop := func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		// After a notice the channel is no longer registered, and key may have new listeners.
		if waiting := l.listeners[key]; waiting != nil {
			delete(waiting, released)
			if len(waiting) == 0 {
				delete(l.listeners, key)
			}
		}
	}
	return released, stop
}

// lock is one acquisition; its identity is the owner token.
type lock struct {
	locker *Locker
	key    string
}

// Release frees the key and notifies its Released listeners if this acquisition still holds
// it, and returns ports.ErrLockNotHeld after its TTL expired or another owner took the key.
func (k *lock) Release(context.Context) error {
	l := k.locker
	l.mu.Lock()
	defer l.mu.Unlock()
	if owner, held := l.held.get(k.key, l.clock.Now()); !held || owner != k {
		return fmt.Errorf("memory: release %q: %w", k.key, ports.ErrLockNotHeld)
	}
	l.held.delete(k.key)
	for released := range l.listeners[k.key] {
		close(released)
	}
	delete(l.listeners, k.key)
	return nil
}
