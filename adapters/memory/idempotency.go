package memory

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/ports"
)

var _ ports.IdempotencyStore = (*IdempotencyStore)(nil)

// IdempotencyStore keeps idempotency records with leases and TTLs measured on a clock. Each
// method is atomic under one mutex, as a Redis script is.
type IdempotencyStore struct {
	clock ports.Clock

	mu      sync.Mutex
	records *expiringMap[ports.IdempotencyKey, idempotencyRecord]
}

// idempotencyRecord is one key's state: IN_PROGRESS until completed is set.
type idempotencyRecord struct {
	token       string
	fingerprint string
	leaseUntil  time.Time
	completed   bool
	response    ports.StoredResponse
}

// NewIdempotencyStore returns an empty store whose leases and TTLs run on clock.
func NewIdempotencyStore(clock ports.Clock) *IdempotencyStore {
	return &IdempotencyStore{clock: clock, records: newExpiringMap[ports.IdempotencyKey, idempotencyRecord]()}
}

// Begin starts key for the caller when it is absent or its IN_PROGRESS lease has expired (a
// takeover: a fresh record with the caller's fingerprint, a new token, lease and ttl); otherwise
// it reports the record's state without changing it.
func (s *IdempotencyStore) Begin(_ context.Context, key ports.IdempotencyKey, fingerprint string, lease, ttl time.Duration) (ports.BeginResult, error) {
	if lease <= 0 || ttl <= 0 {
		return ports.BeginResult{}, fmt.Errorf("memory: idempotency begin: lease %v and ttl %v must be positive", lease, ttl)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if rec, ok := s.records.get(key, now); ok {
		switch {
		case rec.completed:
			response := ports.StoredResponse{Outcome: rec.response.Outcome, Body: bytes.Clone(rec.response.Body)}
			return ports.BeginResult{State: ports.BeginCompleted, Fingerprint: rec.fingerprint, Response: response}, nil
		case now.Before(rec.leaseUntil), rec.fingerprint != fingerprint:
			return ports.BeginResult{State: ports.BeginInProgress, Fingerprint: rec.fingerprint}, nil
		}
	}
	rec := idempotencyRecord{token: uuid.NewString(), fingerprint: fingerprint, leaseUntil: now.Add(lease)}
	s.records.set(key, rec, now.Add(ttl), now)
	return ports.BeginResult{State: ports.BeginStarted, Token: rec.token, Fingerprint: fingerprint}, nil
}

// Complete stores response as the key's COMPLETED answer for a fresh ttl, if token still owns
// the record; otherwise it does nothing.
func (s *IdempotencyStore) Complete(_ context.Context, key ports.IdempotencyKey, token string, response ports.StoredResponse, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("memory: idempotency complete: ttl %v must be positive", ttl)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	rec, ok := s.records.get(key, now)
	if !ok || rec.token != token {
		return nil
	}
	rec.completed = true
	rec.response = ports.StoredResponse{Outcome: response.Outcome, Body: bytes.Clone(response.Body)}
	s.records.set(key, rec, now.Add(ttl), now)
	return nil
}

// Delete removes the key's record if token still owns it; otherwise it does nothing.
func (s *IdempotencyStore) Delete(_ context.Context, key ports.IdempotencyKey, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec, ok := s.records.get(key, s.clock.Now()); ok && rec.token == token {
		s.records.delete(key)
	}
	return nil
}
