package ports

import (
	"context"
	"time"
)

// IdempotencyKey identifies one client request. Keys are scoped per user: the same Key under two
// Scopes are two unrelated records.
type IdempotencyKey struct {
	Scope string // the acting user's id
	Key   string // the client's Idempotency-Key header
}

// BeginState is what Begin found for a key.
type BeginState int

const (
	// BeginStarted: the caller now owns the key (it was absent, or IN_PROGRESS with an expired
	// lease) and must Complete or Delete it.
	BeginStarted BeginState = iota + 1
	// BeginInProgress: another request owns the key and its lease has not expired.
	BeginInProgress
	// BeginCompleted: a response was stored; Record.Response holds it.
	BeginCompleted
)

// StoredResponse is the answer replayed for a completed key.
type StoredResponse struct {
	Status int
	Body   []byte
}

// BeginResult reports the outcome of Begin.
type BeginResult struct {
	State BeginState
	// Token fences the caller's ownership (BeginStarted only): Complete and Delete with a stale
	// token, after another request took the key over, do nothing.
	Token string
	// Fingerprint of the request that created the record (all states).
	Fingerprint string
	// Response is set for BeginCompleted.
	Response StoredResponse
}

// IdempotencyStore records requests by key so a retried request is answered, not re-run.
//
// Begin is a single atomic operation: of any number of concurrent callers for an absent key,
// exactly one gets BeginStarted; the record is IN_PROGRESS with the caller's fingerprint, a
// lease and a TTL. While the lease lasts, others get BeginInProgress; once it has expired, the
// next caller with the same fingerprint takes the key over (BeginStarted, new token, new lease),
// while a caller with another fingerprint still gets BeginInProgress and the original one. Records disappear after
// ttl. Complete stores the response as COMPLETED with a fresh ttl, and Delete removes the
// record; both act only if token still owns the record and otherwise return nil.
// Infrastructure failures wrap ErrUnavailable.
type IdempotencyStore interface {
	Begin(ctx context.Context, key IdempotencyKey, fingerprint string, lease, ttl time.Duration) (BeginResult, error)
	Complete(ctx context.Context, key IdempotencyKey, token string, response StoredResponse, ttl time.Duration) error
	Delete(ctx context.Context, key IdempotencyKey, token string) error
}
