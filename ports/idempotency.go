package ports

import (
	"context"
	"errors"
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

// StoredResponse is the answer replayed for a completed key: the outcome the use case named
// (the edge maps it to a status) and the encoded value.
type StoredResponse struct {
	Outcome string
	Body    []byte
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

// ErrMarkerExists means an idempotency marker for the key is already stored.
var ErrMarkerExists = errors.New("idempotency marker exists")

// IdempotencyMarker is one request's answer committed in the same database transaction as the
// business write it answers, so the answer survives what the IdempotencyStore may lose (a crash
// between commit and Complete, a Redis restart).
type IdempotencyMarker struct {
	Key         IdempotencyKey
	Fingerprint string
	Response    StoredResponse
	CreatedAt   time.Time
}

// IdempotencyMarkerRepository stores idempotency markers in the use case's database.
//
// Find returns the markers stored for keys, as the transaction in ctx sees them; keys without a
// marker are absent from the map. Scope and key are matched exactly, case and trailing spaces
// included. Save inserts markers in one statement, all or none, under UNIQUE(scope, key): a key
// that already has a marker, including one a concurrent transaction inserted first, fails with
// ErrMarkerExists. Both take part in the transaction ctx carries, so a marker commits or rolls
// back with the write it answers. In a transaction an adapter may hold Save's insert back with
// the writes before it (see CrewMemberRepository) until the transaction's next statement or its
// commit, which then answers its errors, ErrMarkerExists included. Prune deletes up to limit
// markers created before the given time and returns how many it deleted.
type IdempotencyMarkerRepository interface {
	Find(ctx context.Context, keys []IdempotencyKey) (map[IdempotencyKey]IdempotencyMarker, error)
	Save(ctx context.Context, markers []IdempotencyMarker) error
	Prune(ctx context.Context, before time.Time, limit int) (int, error)
}
