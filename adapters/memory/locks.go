package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// errDeadlock is what a database answers when two transactions wait for each other's locks.
var errDeadlock = errors.New("deadlock detected")

// rowKey names one lockable row or unique-key value: the table and the key's value, which must
// be comparable.
type rowKey struct {
	table string
	key   any
}

func (k rowKey) String() string { return fmt.Sprintf("%s %v", k.table, k.key) }

// rowLock is one held lock; released is closed when its owner's transaction ends.
type rowLock struct {
	owner    *tx
	released chan struct{}
}

// lockManager grants exclusive row locks to transactions, as SELECT ... FOR UPDATE and writes do
// in a database. Its mutex is never held while waiting: a waiter sleeps on the holder's channel
// and competes again once it is closed.
type lockManager struct {
	mu    sync.Mutex
	locks map[rowKey]*rowLock
	// waitingFor maps a blocked transaction to the lock it waits for, to detect deadlocks.
	waitingFor map[*tx]*rowLock
	// held lists each transaction's locks, to release them when it ends.
	held map[*tx][]rowKey
}

func newLockManager() *lockManager {
	return &lockManager{
		locks:      make(map[rowKey]*rowLock),
		waitingFor: make(map[*tx]*rowLock),
		held:       make(map[*tx][]rowKey),
	}
}

// acquire locks key for t, waiting while another transaction holds it. It returns ctx's error if
// ctx ends first, and errDeadlock if waiting would close a cycle of transactions.
func (m *lockManager) acquire(ctx context.Context, t *tx, key rowKey) error {
	for {
		m.mu.Lock()
		holder, taken := m.locks[key]
		if !taken {
			m.locks[key] = &rowLock{owner: t, released: make(chan struct{})}
			m.held[t] = append(m.held[t], key)
			m.mu.Unlock()
			return nil
		}
		if holder.owner == t {
			m.mu.Unlock()
			return nil
		}
		if m.waitsFor(holder.owner, t) {
			m.mu.Unlock()
			return fmt.Errorf("memory: lock %v: %w", key, errDeadlock)
		}
		m.waitingFor[t] = holder
		m.mu.Unlock()

		select {
		case <-holder.released:
		case <-ctx.Done():
		}
		m.mu.Lock()
		delete(m.waitingFor, t)
		m.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("memory: waiting for lock %v: %w", key, err)
		}
	}
}

// waitsFor reports whether from is blocked, directly or through other waiters, on a lock that
// target holds. Callers hold m.mu.
func (m *lockManager) waitsFor(from, target *tx) bool {
	for t := from; t != nil; {
		if t == target {
			return true
		}
		next, waiting := m.waitingFor[t]
		if !waiting {
			return false
		}
		t = next.owner
	}
	return false
}

// releaseAll frees every lock t holds and wakes their waiters.
func (m *lockManager) releaseAll(t *tx) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, key := range m.held[t] {
		close(m.locks[key].released)
		delete(m.locks, key)
	}
	delete(m.held, t)
}

// tryAcquire locks key for t if no other transaction holds it, and reports whether t holds it
// now, without waiting: FOR UPDATE SKIP LOCKED.
func (m *lockManager) tryAcquire(t *tx, key rowKey) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	holder, taken := m.locks[key]
	if taken {
		return holder.owner == t
	}
	m.locks[key] = &rowLock{owner: t, released: make(chan struct{})}
	m.held[t] = append(m.held[t], key)
	return true
}
