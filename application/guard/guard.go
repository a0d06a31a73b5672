// Package guard is the one implementation of the seeds' facade that every guarded flow takes:
// idempotency begin → distributed lock with backoff and jitter → the use case → store or drop the
// idempotency record → unlock, with every exit path (success, rejection, failure, panic) covered.
//
// Correctness never depends on the lock: it only serialises contenders so they do not pile up on
// the database row lock. The use case's own transaction and constraints are the final defence.
package guard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/ports"
)

// Errors the guard answers with; the edge maps their codes to statuses.
var (
	ErrKeyRequired = domain.NewError("IDEMPOTENCY_KEY_REQUIRED", "the Idempotency-Key header is required")
	ErrInProgress  = domain.NewError("IDEMPOTENCY_IN_PROGRESS", "a request with this Idempotency-Key is still in progress")
	ErrKeyReused   = domain.NewError("IDEMPOTENCY_KEY_REUSED", "this Idempotency-Key was used with a different request")
	ErrBusy        = domain.NewError("TOO_MANY_REQUESTS", "too many concurrent requests for this resource; retry later")
)

// MaxKeyLength is the longest accepted Idempotency-Key.
const MaxKeyLength = 255

// Config tunes the guard. The zero value of a field takes the default named beside it.
type Config struct {
	IdempotencyTTL time.Duration // 1h: how long a record answers retries
	Lease          time.Duration // 30s: how long an IN_PROGRESS record blocks its key
	LockTTL        time.Duration // 1s: the distributed lock's expiry
	BaseDelay      time.Duration // 100ms: backoff before retry n is BaseDelay × 2^n plus jitter
	MaxRetries     int           // 5: lock attempts after the first
	ReleaseTimeout time.Duration // 1s: bound on unlock/record writes after the request is done
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.IdempotencyTTL, time.Hour)
	def(&c.Lease, 30*time.Second)
	def(&c.LockTTL, time.Second)
	def(&c.BaseDelay, 100*time.Millisecond)
	def(&c.ReleaseTimeout, time.Second)
	if c.MaxRetries <= 0 {
		c.MaxRetries = 5
	}
	return c
}

// Observer receives the guard's events for metrics. All methods must be cheap and safe for
// concurrent use.
type Observer interface {
	LockAcquired(lockKey string, attempts int, waited time.Duration)
	LockExhausted(lockKey string)
	Replayed()
}

type noObserver struct{}

func (noObserver) LockAcquired(string, int, time.Duration) {}
func (noObserver) LockExhausted(string)                    {}
func (noObserver) Replayed()                               {}

// Guard runs use cases under idempotency and a distributed lock.
type Guard struct {
	store    ports.IdempotencyStore
	locker   ports.Locker
	sleeper  ports.Sleeper
	cfg      Config
	jitter   func(max time.Duration) time.Duration
	observer Observer
}

// Option customises a Guard.
type Option func(*Guard)

// WithJitter replaces the random jitter (uniform in [0, max)) added to each backoff delay.
func WithJitter(jitter func(max time.Duration) time.Duration) Option {
	return func(g *Guard) { g.jitter = jitter }
}

// WithObserver reports lock waits, exhaustion and replays to o.
func WithObserver(o Observer) Option { return func(g *Guard) { g.observer = o } }

// New returns a Guard.
func New(store ports.IdempotencyStore, locker ports.Locker, sleeper ports.Sleeper, cfg Config, opts ...Option) *Guard {
	g := &Guard{
		store:    store,
		locker:   locker,
		sleeper:  sleeper,
		cfg:      cfg.withDefaults(),
		jitter:   uniformJitter,
		observer: noObserver{},
	}
	for _, o := range opts {
		o(g)
	}
	return g
}

func uniformJitter(max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	return rand.N(max)
}

// Request describes one guarded call.
type Request struct {
	UserID         string // the authenticated user: idempotency keys are scoped to them
	IdempotencyKey string
	// Fingerprint identifies the request's content (see Fingerprint); reusing a key with another
	// fingerprint is rejected.
	Fingerprint string
	LockKey     string // the flow's lock, e.g. "crew:{crewId}"
	// SuccessStatus is stored with the response so a replay answers the same status.
	SuccessStatus int
	// Precheck, when set, runs after the idempotency record is taken (so a completed request is
	// still replayed) and before the lock: an error rejects at once instead of queueing for the
	// lock. It reads without locking; the use case must re-check under its own locks.
	Precheck func(ctx context.Context) error
}

// Result is a guarded call's answer.
type Result[T any] struct {
	Value    T
	Status   int
	Replayed bool // the answer is a stored response, the use case did not run
}

// Fingerprint hashes what identifies a request: the operation (method and concrete path with
// its ids) and its canonical body.
func Fingerprint(operation string, canonicalBody []byte) string {
	h := sha256.New()
	h.Write([]byte(operation))
	h.Write([]byte{0})
	h.Write(canonicalBody)
	return hex.EncodeToString(h.Sum(nil))
}

// ValidateKey checks an Idempotency-Key: 1..255 printable ASCII characters.
func ValidateKey(key string) error {
	if key == "" {
		return ErrKeyRequired
	}
	if len(key) > MaxKeyLength {
		return domain.Invalid("Idempotency-Key", "must be at most %d characters", MaxKeyLength)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return domain.Invalid("Idempotency-Key", "must be printable ASCII")
		}
	}
	return nil
}

// Run executes fn under g for req. A completed earlier request with the same key is replayed
// without running fn. A domain error from fn (a business rejection) or any failure drops the
// idempotency record so the client may retry; success stores the response for replays.
func Run[T any](ctx context.Context, g *Guard, req Request, fn func(ctx context.Context) (T, error)) (res Result[T], err error) {
	if err := ValidateKey(req.IdempotencyKey); err != nil {
		return res, err
	}
	key := ports.IdempotencyKey{Scope: req.UserID, Key: req.IdempotencyKey}
	begun, err := g.store.Begin(ctx, key, req.Fingerprint, g.cfg.Lease, g.cfg.IdempotencyTTL)
	if err != nil {
		return res, fmt.Errorf("guard: begin idempotency: %w", err)
	}
	if begun.Fingerprint != req.Fingerprint {
		return res, ErrKeyReused
	}
	switch begun.State {
	case ports.BeginInProgress:
		return res, ErrInProgress
	case ports.BeginCompleted:
		if err := json.Unmarshal(begun.Response.Body, &res.Value); err != nil {
			return res, fmt.Errorf("guard: decode stored response: %w", err)
		}
		g.observer.Replayed()
		return Result[T]{Value: res.Value, Status: begun.Response.Status, Replayed: true}, nil
	}

	// From here on this request owns the key: every exit must complete or delete it, with a
	// context the client's disconnect cannot cancel.
	detached := context.WithoutCancel(ctx)
	completed := false
	defer func() {
		if completed {
			return
		}
		dctx, cancel := context.WithTimeout(detached, g.cfg.ReleaseTimeout)
		defer cancel()
		// Best effort: if the delete fails too, the lease frees the key.
		_ = g.store.Delete(dctx, key, begun.Token)
	}()

	if req.Precheck != nil {
		if err := req.Precheck(ctx); err != nil {
			return res, err
		}
	}
	lock, err := g.acquire(ctx, req.LockKey)
	if err != nil {
		return res, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(detached, g.cfg.ReleaseTimeout)
		defer cancel()
		// ErrLockNotHeld means the TTL ran out mid-flight; the database kept the invariant.
		_ = lock.Release(dctx)
	}()

	value, err := fn(ctx)
	if err != nil {
		return res, err
	}
	body, err := json.Marshal(value)
	if err != nil {
		return res, fmt.Errorf("guard: encode response: %w", err)
	}
	dctx, cancel := context.WithTimeout(detached, g.cfg.ReleaseTimeout)
	defer cancel()
	// The business change is committed: answer success even if the record cannot be stored.
	// A retry after the lease re-runs the use case, which its constraints make safe.
	_ = g.store.Complete(dctx, key, begun.Token, ports.StoredResponse{Status: req.SuccessStatus, Body: body}, g.cfg.IdempotencyTTL)
	completed = true
	return Result[T]{Value: value, Status: req.SuccessStatus}, nil
}

// acquire takes lockKey, retrying MaxRetries times after BaseDelay × 2^attempt plus jitter.
func (g *Guard) acquire(ctx context.Context, lockKey string) (ports.Lock, error) {
	var waited time.Duration
	for attempt := 0; ; attempt++ {
		lock, err := g.locker.TryAcquire(ctx, lockKey, g.cfg.LockTTL)
		if err == nil {
			g.observer.LockAcquired(lockKey, attempt+1, waited)
			return lock, nil
		}
		if !errors.Is(err, ports.ErrLockNotAcquired) {
			return nil, fmt.Errorf("guard: lock %s: %w", lockKey, err)
		}
		if attempt == g.cfg.MaxRetries {
			g.observer.LockExhausted(lockKey)
			busy := *ErrBusy
			busy.RetryAfter = g.cfg.LockTTL
			return nil, &busy
		}
		delay := g.Backoff(attempt)
		if err := g.sleeper.Sleep(ctx, delay); err != nil {
			return nil, fmt.Errorf("guard: waiting for lock %s: %w", lockKey, err)
		}
		waited += delay
	}
}

// Backoff is the wait before retry attempt (0-based): BaseDelay × 2^attempt plus jitter in
// [0, BaseDelay × 2^attempt / 2).
func (g *Guard) Backoff(attempt int) time.Duration {
	base := g.cfg.BaseDelay << attempt
	return base + g.jitter(base/2)
}
