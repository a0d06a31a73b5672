package memory

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
