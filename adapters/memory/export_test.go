package memory

import "context"

// WaitingTransactions returns how many transactions are blocked on a row lock of d, so tests
// can wait until a contender is really queued instead of sleeping.
func WaitingTransactions(d *Database) int {
	d.locks.mu.Lock()
	defer d.locks.mu.Unlock()
	return len(d.locks.waitingFor)
}

// StoredIdempotencyRecords returns how many records s holds, expired ones not yet purged
// included.
func StoredIdempotencyRecords(s *IdempotencyStore) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records.entries)
}

// ReleaseRowLocks frees every row lock held by the transaction ctx carries, as a broken
// GetForUpdate that unlocks right after its read would; tests use it to show that the
// concurrency tests catch such a lock.
func ReleaseRowLocks(ctx context.Context, d *Database) {
	if t, ok := d.txOf(ctx); ok {
		d.locks.releaseAll(t)
	}
}

// ReleaseListeners returns how many Released channels of key l still holds.
func ReleaseListeners(l *Locker, key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.listeners[key])
}

// StoredRooms returns how many rooms w holds, expired ones not yet forgotten included.
func StoredRooms(w *WaitingRoom) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.rooms)
}
