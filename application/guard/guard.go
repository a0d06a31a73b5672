// Package guard is the one guarded path that every guarded flow takes. It has two steps a flow
// may use together or apart:
//
//   - idempotency (Once, and Lane.Run): a request's key is taken atomically, a completed request
//     is replayed instead of re-run, and every exit (success, rejection, failure, panic) stores or
//     drops the record with a context the client cannot cancel;
//   - the lock (Lane): requests for one lock key queue in process, the head of the queue takes
//     the distributed lock with exponential backoff (woken early when the key is released
//     anywhere) and serves every request queued behind it in one batch — combining — each
//     request keeping its own answer.
//
// Correctness never depends on the lock: it only serialises contenders so they do not pile up on
// the database row lock. The use case's own transaction and constraints are the final defence.
// The core names outcomes (OutcomeCreated); the edge maps them and error codes to statuses.
package guard

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
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
	ErrKeyRequired = domain.NewError(domain.KindInvalid, "IDEMPOTENCY_KEY_REQUIRED", "the Idempotency-Key header is required")
	ErrInProgress  = domain.NewError(domain.KindConflict, "IDEMPOTENCY_IN_PROGRESS", "a request with this Idempotency-Key is still in progress")
	ErrKeyReused   = domain.NewError(domain.KindConflict, "IDEMPOTENCY_KEY_REUSED", "this Idempotency-Key was used with a different request")
	ErrBusy        = domain.NewError(domain.KindBusy, "TOO_MANY_REQUESTS", "too many concurrent requests for this resource; retry later")
)

// MaxKeyLength is the longest accepted Idempotency-Key.
const MaxKeyLength = 255

// Outcome names what a successful call did. It is stored with the answer, so a replay names the
// same outcome, and the edge maps it to a status.
type Outcome string

// Outcomes of successful calls.
const (
	OutcomeCreated Outcome = "created" // something new exists (HTTP 201)
	OutcomeDone    Outcome = "done"    // the call took effect (HTTP 200)
)

// Config tunes the guard. The zero value of a field takes the default named beside it.
type Config struct {
	IdempotencyTTL time.Duration // 1h: how long a record answers retries
	Lease          time.Duration // 30s: how long an IN_PROGRESS record blocks its key
	LockTTL        time.Duration // 1s: the distributed lock's expiry
	BaseDelay      time.Duration // 100ms: backoff before retry n is BaseDelay × 2^n plus jitter
	MaxRetries     int           // 5: lock attempts after the first; negative: none (one attempt, then busy)
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
	switch {
	case c.MaxRetries == 0:
		c.MaxRetries = 5
	case c.MaxRetries < 0:
		c.MaxRetries = 0
	}
	return c
}

// Observer receives the guard's events for metrics. All methods must be cheap and safe for
// concurrent use.
type Observer interface {
	// Queued reports a request joining lockKey's queue, which then holds length requests (the
	// head included).
	Queued(lockKey string, length int)
	LockAcquired(lockKey string, attempts int, waited time.Duration)
	LockExhausted(lockKey string)
	BatchServed(lockKey string, size int)
	Replayed()
}

type noObserver struct{}

func (noObserver) Queued(string, int)                      {}
func (noObserver) LockAcquired(string, int, time.Duration) {}
func (noObserver) LockExhausted(string)                    {}
func (noObserver) BatchServed(string, int)                 {}
func (noObserver) Replayed()                               {}

// Deps are the ports the guard runs on. Tx and Markers are needed only by lanes that commit
// idempotency markers (LaneConfig.Markers).
type Deps struct {
	Idempotency ports.IdempotencyStore
	Locker      ports.Locker
	Clock       ports.Clock
	Sleeper     ports.Sleeper
	Tx          ports.TxRunner
	Markers     ports.IdempotencyMarkerRepository
}

// Guard runs use cases under idempotency and a distributed lock.
type Guard struct {
	deps     Deps
	cfg      Config
	jitter   func(max time.Duration) time.Duration
	observer Observer
	tracer   ports.Tracer
}

// Option customises a Guard.
type Option func(*Guard)

// WithJitter replaces the random jitter (uniform in [0, max)) added to each backoff delay.
func WithJitter(jitter func(max time.Duration) time.Duration) Option {
	return func(g *Guard) { g.jitter = jitter }
}

// WithObserver reports lock waits, exhaustion, batches and replays to o.
func WithObserver(o Observer) Option { return func(g *Guard) { g.observer = o } }

// WithTracer records the guard's phases as spans (see tracing.go).
func WithTracer(t ports.Tracer) Option { return func(g *Guard) { g.tracer = t } }

// New returns a Guard.
func New(deps Deps, cfg Config, opts ...Option) *Guard {
	g := &Guard{deps: deps, cfg: cfg.withDefaults(), jitter: uniformJitter, observer: noObserver{}, tracer: ports.NoTracer{}}
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
	LockKey     string  // the flow's lock, e.g. "crew:{crewId}"; Once ignores it
	Outcome     Outcome // what success is named, stored and replayed as
	// Precheck, when set, runs before the lock: an error rejects at once instead of queueing for
	// the lock. It answers only once the idempotency record is taken, so a completed request is
	// still replayed: Once runs it after taking the record, Lane.Run while taking it (it may then
	// run for a request that is replayed). The use case must re-check under its own locks.
	Precheck func(ctx context.Context) error
	// Budget, when set, is the request's time on the database, which its reads before Run (or
	// in Precheck) have spent from: Lane.Run's batch transaction has what is left, from when the
	// batch starts under the lock. Once and OnceMarked ignore it.
	Budget *Budget
}

// Result is a guarded call's answer.
type Result[T any] struct {
	Value    T
	Outcome  Outcome
	Replayed bool // the answer is a stored response, the use case did not run
}

// Fingerprint hashes what identifies a request, never how it arrived: the operation's name
// ("crew.join"), the ids it acts on in the operation's fixed order, and its other input in a
// canonical encoding (nil when it has none). Two requests share a fingerprint only when all
// three match: each part is hashed with its length, so no part runs into the next.
func Fingerprint(operation string, ids []string, input []byte) string {
	h := sha256.New()
	part := func(b []byte) {
		h.Write(binary.AppendUvarint(nil, uint64(len(b))))
		h.Write(b)
	}
	part([]byte(operation))
	h.Write(binary.AppendUvarint(nil, uint64(len(ids))))
	for _, id := range ids {
		part([]byte(id))
	}
	part(input)
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

// Once runs fn at most once per idempotency key, without a lock: a completed earlier request
// with the same key is replayed without running fn; a domain error from fn (a business
// rejection) or any failure drops the record so the client may retry; success stores the
// answer for replays.
func Once[T any](ctx context.Context, g *Guard, req Request, fn func(ctx context.Context) (T, error)) (Result[T], error) {
	return once(ctx, g, req, func(ctx context.Context, _ *ticket) (T, *ports.StoredResponse, error) {
		value, err := fn(ctx)
		return value, nil, err
	})
}

// OnceMarked is Once for a use case whose write is one transaction: fn runs in a transaction of
// Deps.Tx that also commits its answer as an idempotency marker, so a retry whose record the
// IdempotencyStore lost (a crash between commit and Complete, a Redis restarted empty) is
// answered from the database instead of running fn again on what the data holds by then. It
// panics on a Guard without Deps.Tx and Deps.Markers.
//
// The marker is looked for only when fn's transaction did not commit (fn refused, or the Save
// found the key's marker), as a lane's batch does: a read of it first would be the
// transaction's first read, and on MySQL, whose plain reads see the snapshot of a transaction's
// first read, fn would then read rows as they were before the locks it takes afterwards (a cart
// add committed meanwhile, lost when the order emptied the cart).
func OnceMarked[T any](ctx context.Context, g *Guard, req Request, fn func(ctx context.Context) (T, error)) (Result[T], error) {
	if g.deps.Tx == nil || g.deps.Markers == nil {
		panic("guard: OnceMarked needs a Guard with Deps.Tx and Deps.Markers")
	}
	return once(ctx, g, req, func(ctx context.Context, t *ticket) (T, *ports.StoredResponse, error) {
		var value T
		err := g.deps.Tx.InTx(ctx, func(ctx context.Context) error {
			var err error
			if value, err = fn(ctx); err != nil {
				return err
			}
			body, err := json.Marshal(value)
			if err != nil {
				return fmt.Errorf("guard: encode response: %w", err)
			}
			marker := ports.IdempotencyMarker{Key: t.key, Fingerprint: t.fingerprint,
				Response: ports.StoredResponse{Outcome: string(t.outcome), Body: body}, CreatedAt: g.deps.Clock.Now()}
			if err := g.deps.Markers.Save(ctx, []ports.IdempotencyMarker{marker}); err != nil {
				return fmt.Errorf("guard: save idempotency marker: %w", err)
			}
			return nil
		})
		var zero T
		switch {
		case err == nil:
			return value, nil, nil
		case errors.Is(err, ports.ErrUnavailable) || ctx.Err() != nil:
			// The database did not answer, or the client left: a read of the marker would only
			// make the answer wait a second time.
			return zero, nil, err
		}
		stored, findErr := g.storedMarker(ctx, t)
		switch {
		case findErr != nil:
			// Whether the key was answered before is unknown: not a refusal to stand by.
			return zero, nil, findErr
		case stored != nil:
			return zero, stored, nil
		case errors.Is(err, ports.ErrMarkerExists):
			// A request with the same key committed meanwhile, and its marker is not visible yet;
			// its retry will be replayed.
			return zero, nil, ErrInProgress
		}
		return zero, nil, err
	})
}

// storedMarker is the answer a marker committed for t's key holds, nil when there is none, or
// ErrKeyReused when the marker is of another request.
func (g *Guard) storedMarker(ctx context.Context, t *ticket) (*ports.StoredResponse, error) {
	found, err := g.deps.Markers.Find(ctx, []ports.IdempotencyKey{t.key})
	if err != nil {
		return nil, fmt.Errorf("guard: find idempotency marker: %w", err)
	}
	m, ok := found[t.key]
	switch {
	case !ok:
		return nil, nil
	case m.Fingerprint != t.fingerprint:
		return nil, ErrKeyReused
	}
	return &m.Response, nil
}

// once takes req's key, runs run, and completes the record with the answer: the value run
// produced, or the stored answer it found instead, which is replayed.
func once[T any](ctx context.Context, g *Guard, req Request,
	run func(ctx context.Context, t *ticket) (T, *ports.StoredResponse, error)) (Result[T], error) {
	t, replay, err := g.begin(ctx, req)
	if err != nil || replay != nil {
		return replayed[T](g, replay, err)
	}
	defer t.abandon(false)
	if req.Precheck != nil {
		if err := req.Precheck(ctx); err != nil {
			return Result[T]{}, err
		}
	}
	value, stored, err := run(ctx, t)
	if err != nil {
		return Result[T]{}, err
	}
	if stored != nil {
		t.complete(*stored, false)
		return replayed[T](g, stored, nil)
	}
	// The record keeps the plain value (Go field names), not the answer's wire form: the edge
	// encodes a replayed value as it encodes a fresh one.
	body, err := json.Marshal(value)
	if err != nil {
		return Result[T]{}, fmt.Errorf("guard: encode response: %w", err)
	}
	t.complete(ports.StoredResponse{Outcome: string(req.Outcome), Body: body}, false)
	return Result[T]{Value: value, Outcome: req.Outcome}, nil
}

// ticket is a request's ownership of its idempotency key, from begin until complete or abandon.
type ticket struct {
	g           *Guard
	key         ports.IdempotencyKey
	fingerprint string
	outcome     Outcome
	token       string
	// detached outlives the request: a client that hangs up must not leave its key blocked.
	detached context.Context
	done     bool
}

// begin validates and takes req's idempotency key. It returns the ticket when the caller now
// owns the key, or the stored answer of an earlier completed request.
func (g *Guard) begin(ctx context.Context, req Request) (*ticket, *ports.StoredResponse, error) {
	if err := ValidateKey(req.IdempotencyKey); err != nil {
		return nil, nil, err
	}
	key := ports.IdempotencyKey{Scope: req.UserID, Key: req.IdempotencyKey}
	spanCtx, span := g.tracer.Start(ctx, spanBegin)
	begun, err := g.deps.Idempotency.Begin(spanCtx, key, req.Fingerprint, g.cfg.Lease, g.cfg.IdempotencyTTL)
	span.End(err)
	if err != nil {
		return nil, nil, fmt.Errorf("guard: begin idempotency: %w", err)
	}
	if begun.Fingerprint != req.Fingerprint {
		return nil, nil, ErrKeyReused
	}
	switch begun.State {
	case ports.BeginInProgress:
		return nil, nil, ErrInProgress
	case ports.BeginCompleted:
		return nil, &begun.Response, nil
	}
	return &ticket{
		g: g, key: key, fingerprint: req.Fingerprint, outcome: req.Outcome, token: begun.Token,
		detached: context.WithoutCancel(ctx),
	}, nil, nil
}

// complete stores the answer for replays. The business change is committed, so a failure here
// is not the client's: the answer stands, and a retry after the lease re-runs the use case,
// which its constraints (or its idempotency marker) make safe. storeDown says the store just
// failed this request, so the answer does not wait for it: the write goes on in the background.
func (t *ticket) complete(response ports.StoredResponse, storeDown bool) {
	t.done = true
	// The write, and a retry in the background, nest under the span.
	var span ports.Span
	t.detached, span = t.g.tracer.Start(t.detached, spanComplete)
	defer span.End(nil)
	t.settle(func(ctx context.Context) error {
		return t.g.deps.Idempotency.Complete(ctx, t.key, t.token, response, t.g.cfg.IdempotencyTTL)
	}, storeDown)
}

// abandon drops the record unless complete ran, so the client may retry. Deferred, it also runs
// on a panic. storeDown is as for complete.
func (t *ticket) abandon(storeDown bool) {
	if t.done {
		return
	}
	t.settle(func(ctx context.Context) error {
		return t.g.deps.Idempotency.Delete(ctx, t.key, t.token)
	}, storeDown)
}

// settle writes the record with write, bounded by ReleaseTimeout, before the answer; or, when
// storeDown, only in the background. When the store does not answer (Redis frozen or
// restarting), the write is retried in the background until the lease would free the key
// anyway, so a key is not blocked for the whole lease by a blip.
func (t *ticket) settle(write func(ctx context.Context) error, storeDown bool) {
	if storeDown {
		go t.retryWrite(write, 0)
		return
	}
	if err := t.write(write); errors.Is(err, ports.ErrUnavailable) {
		go t.retryWrite(write, t.g.cfg.BaseDelay)
	}
}

func (t *ticket) write(write func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(t.detached, t.g.cfg.ReleaseTimeout)
	defer cancel()
	return write(ctx)
}

// retryWrite runs write after wait, then after growing waits (BaseDelay, doubling, at most
// LockTTL) until the store answers or the lease has run out.
func (t *ticket) retryWrite(write func(ctx context.Context) error, wait time.Duration) {
	g := t.g
	giveUp := g.deps.Clock.Now().Add(g.cfg.Lease)
	for g.deps.Clock.Now().Before(giveUp) {
		if wait > 0 {
			if err := g.deps.Sleeper.Sleep(t.detached, wait); err != nil {
				return
			}
		}
		if err := t.write(write); !errors.Is(err, ports.ErrUnavailable) {
			return
		}
		wait = min(max(2*wait, g.cfg.BaseDelay), g.cfg.LockTTL)
	}
}

// replayed answers a stored response, or passes err through.
func replayed[T any](g *Guard, stored *ports.StoredResponse, err error) (Result[T], error) {
	var res Result[T]
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(stored.Body, &res.Value); err != nil {
		return Result[T]{}, fmt.Errorf("guard: decode stored response: %w", err)
	}
	g.observer.Replayed()
	res.Outcome, res.Replayed = Outcome(stored.Outcome), true
	return res, nil
}

// Backoff is the wait before retry attempt (0-based): BaseDelay × 2^attempt plus jitter in
// [0, BaseDelay × 2^attempt / 2).
func (g *Guard) Backoff(attempt int) time.Duration {
	base := g.cfg.BaseDelay << attempt
	return base + g.jitter(base/2)
}

// lockBudget is the longest a request waits for the lock before its 429: the whole
// backoff schedule with the largest jitter, about 4.6 s at the defaults.
func (g *Guard) lockBudget() time.Duration {
	var total time.Duration
	for attempt := range g.cfg.MaxRetries {
		base := g.cfg.BaseDelay << attempt
		total += base + base/2
	}
	return total
}

// PruneMarkers deletes the idempotency markers older than the idempotency TTL — past it a key
// answers nothing anyway — in rounds of at most limit, until a round finds fewer. It returns how
// many it deleted. Several instances may prune at once: each marker is deleted once.
func (g *Guard) PruneMarkers(ctx context.Context, limit int) (int, error) {
	before := g.deps.Clock.Now().Add(-g.cfg.IdempotencyTTL)
	total := 0
	for {
		n, err := g.deps.Markers.Prune(ctx, before, limit)
		total += n
		if err != nil {
			return total, fmt.Errorf("guard: prune idempotency markers: %w", err)
		}
		if n < limit {
			return total, nil
		}
	}
}
