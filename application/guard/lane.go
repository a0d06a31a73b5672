package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rushgate/rushgate/application/guard/combine"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/ports"
)

// DefaultMaxBatch bounds a batch when LaneConfig.MaxBatch is zero.
const DefaultMaxBatch = 64

// Answer is one request's result from a batch: its value, or the error (a business rejection
// such as crew.ErrFull) that answers that request alone.
type Answer[Out any] = combine.Answer[Out]

// BatchFunc serves requests that share one lock key, under that lock. It runs them in one
// transaction of its own (TxRunner.InTx joins the guard's when markers are on) and returns one
// answer per request, in order. An error instead fails the whole batch: it must leave nothing
// written (return it from inside InTx). When the error wraps ports.ErrUnavailable (a dependency
// did not answer), it answers the batch and every request queued behind it on the key at once:
// a re-run could only wait for the same dependency again. Any other error (a constraint the lock
// missed) makes the guard run each request alone, so one bad request cannot fail its neighbours.
type BatchFunc[In, Out any] func(ctx context.Context, batch []In) ([]Answer[Out], error)

// LaneConfig tunes a Lane.
type LaneConfig struct {
	// MaxBatch bounds how many queued requests one lock hold serves; DefaultMaxBatch when zero,
	// and 1 turns combining off.
	MaxBatch int
	// Markers commits each successful answer as an idempotency marker in the batch's transaction
	// (the Guard needs Deps.Tx and Deps.Markers), so a request whose Complete was lost (a crash,
	// a Redis blip) is answered from the database on retry and never applied twice.
	Markers bool
	// LockTTL, LockWait and Busy give this lane its own lock policy, for a flow whose contract
	// names one (a seat: wait up to 3 s, lease 5 s, then SEAT_BEING_SELECTED). LockTTL is the
	// lock's expiry (Config.LockTTL when zero). LockWait is the longest a request waits for the
	// lock from its arrival, retrying on the backoff schedule for as long as it lasts (when
	// zero, the whole schedule of Config.MaxRetries backoffs). Busy is the error a request
	// that waited in vain answers (ErrBusy when nil), with Retry-After set to the lock's TTL.
	LockTTL  time.Duration
	LockWait time.Duration
	Busy     *domain.Error
	// SharedTransactions, when positive, lets the batches of different lock keys share a
	// transaction (it needs Markers): a batch ready while that many shared transactions are out
	// waits for one of them to commit, and the batches that waited meanwhile then run one after
	// another in the next one, which commits them together. Each batch still holds its own key's
	// lock and answers its own requests; when any of them fails, the shared transaction rolls back
	// and each batch runs again in a transaction of its own. A crowd spread over many keys then
	// costs one BEGIN and one COMMIT per shared transaction instead of one per batch. Zero gives
	// each batch its own transaction.
	SharedTransactions int
	// ConflictRetries, when positive, re-runs a batch whose function failed with an error
	// wrapping ports.ErrVersionConflict (an optimistic write found its row changed) in a fresh
	// transaction, up to that many times; after the last, every request of the batch answers
	// that error, which should therefore also wrap the domain error the client is to hear. Only a
	// fresh transaction is sure to see the row anew (on MySQL a transaction reads one snapshot).
	ConflictRetries int
}

// Lane serialises one kind of guarded operation per lock key, and combines. Requests for the
// same key wait in a FIFO queue in this process (a combine.Combiner whose gate is the lock);
// only the head contends for the distributed lock, backing off on Config's schedule but retrying as soon as the key is released
// anywhere. Holding it, the head serves up to MaxBatch queued requests in one call of the batch
// function, answers them, releases the lock, and hands the queue to the next head. A head that
// cannot get the key (held by another instance) answers ErrBusy once the whole schedule
// from its arrival is spent (Guard.lockBudget); requests behind it are served by the next holds.
//
// A dependency that does not answer ends the queue rather than each request in turn: when the
// lock's store is unavailable (to take the lock or to release it) or a batch fails with
// ports.ErrUnavailable, every request queued on the key answers that error at once, so a stall
// costs each request at most one of the dependency's timeouts, however long the queue.
type Lane[In, Out any] struct {
	g     *Guard
	cfg   LaneConfig
	run   BatchFunc[In, Out]
	lines *combine.Combiner[string, *waiter[In, Out], reply[Out]] // by lock key
	// shared combines the batches of different keys into shared transactions; nil without
	// LaneConfig.SharedTransactions.
	shared *combine.Combiner[struct{}, sharedRun, struct{}]
}

// sharedRun is one batch's part of a shared transaction: run runs the batch in the transaction
// its context carries and keeps the answers; deadline is the batch's (withinBudgets), zero
// when it has none.
type sharedRun struct {
	run      func(ctx context.Context) error
	deadline time.Time
}

// maxSharedBatches bounds how many batches one shared transaction serves: a transaction holds
// its row locks until it commits, so a longer one makes every batch in it wait for the last.
const maxSharedBatches = 16

// errSharedRolledBack wraps the failure of a shared transaction that its batch did not
// necessarily cause: the batch then runs again in a transaction of its own.
var errSharedRolledBack = errors.New("guard: a shared transaction rolled back")

// NewLane returns a Lane serving batches with run. It panics when cfg.Markers is set on a Guard
// without Deps.Tx and Deps.Markers, or cfg.SharedTransactions without cfg.Markers: that is a
// wiring mistake, not a request's failure.
func NewLane[In, Out any](g *Guard, cfg LaneConfig, run BatchFunc[In, Out]) *Lane[In, Out] {
	if cfg.Markers && (g.deps.Tx == nil || g.deps.Markers == nil) {
		panic("guard: a lane with Markers needs a Guard with Deps.Tx and Deps.Markers")
	}
	if cfg.SharedTransactions > 0 && !cfg.Markers {
		panic("guard: a lane with SharedTransactions needs Markers")
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.LockTTL <= 0 {
		cfg.LockTTL = g.cfg.LockTTL
	}
	if cfg.Busy == nil {
		cfg.Busy = ErrBusy
	}
	l := &Lane[In, Out]{g: g, cfg: cfg, run: run}
	l.lines = combine.New(combine.Config[string, *waiter[In, Out]]{
		MaxBatch: cfg.MaxBatch, Gate: l.lock, Queued: g.observer.Queued,
	}, l.serve)
	if cfg.SharedTransactions > 0 {
		l.shared = combine.New(combine.Config[struct{}, sharedRun]{
			MaxBatch: maxSharedBatches, InFlight: cfg.SharedTransactions,
		}, l.serveShared)
	}
	return l
}

// Run answers in under idempotency and the lock req.LockKey: a completed earlier request with
// the same key is replayed (from the IdempotencyStore, or from its marker when markers are on);
// a rejection or failure drops the key so the client may retry; success stores the answer.
//
// The key is taken while the request queues (and, at the head of its line, takes the lock):
// the two are independent round trips, so the request waits for the slower, not for both. A
// batch runs a request only once its key is taken; a request whose key is refused (a replay, a
// key in progress or reused, a store that did not answer) is answered at once and leaves its
// line, and a lock its line took meanwhile serves the others or is released. Its answer is
// handed over as soon as its batch commits, so its record is stored while the lock is released.
func (l *Lane[In, Out]) Run(ctx context.Context, req Request, in In) (Result[Out], error) {
	if err := ValidateKey(req.IdempotencyKey); err != nil {
		return Result[Out]{}, err
	}
	w := l.newWaiter(ctx, in, make(chan struct{}))
	w.budget = req.Budget
	queueCtx, leave := context.WithCancel(ctx)
	defer leave()
	go l.queue(queueCtx, req, w)
	t, replay, err := l.begin(ctx, req, w)
	if err != nil || replay != nil {
		return replayed[Out](l.g, replay, err)
	}
	storeDown := false
	// A store that just failed the lock would only make the answer wait for its timeout again:
	// the record is then written or dropped in the background.
	defer func() { t.abandon(storeDown) }()
	<-w.answered
	r, err := w.reply, w.err
	storeDown = isLockStoreDown(err) || r.storeDown
	switch {
	case err != nil:
		return Result[Out]{}, err
	case r.replay != nil:
		t.complete(*r.replay, storeDown)
		return replayed[Out](l.g, r.replay, nil)
	}
	t.complete(ports.StoredResponse{Outcome: string(req.Outcome), Body: r.body}, storeDown)
	return Result[Out]{Value: r.value, Outcome: req.Outcome}, nil
}

// begin takes req's idempotency key and admits w to its batch, or refuses it, whatever begin
// does, a panic included: the batch w is taken into waits for it.
func (l *Lane[In, Out]) begin(ctx context.Context, req Request, w *waiter[In, Out]) (t *ticket, replay *ports.StoredResponse, err error) {
	defer func() { w.admit(t, err) }()
	return l.g.begin(ctx, req)
}

// queue runs req's Precheck, then queues w behind req.LockKey, on a goroutine of its own while
// Run takes the key; w hears the answer. A panic answers w rather than ending the process.
func (l *Lane[In, Out]) queue(ctx context.Context, req Request, w *waiter[In, Out]) {
	r, err := combine.Safely(func() (reply[Out], error) {
		if req.Precheck != nil {
			if err := req.Precheck(ctx); err != nil {
				return reply[Out]{}, err
			}
		}
		return l.do(ctx, req.LockKey, w)
	})
	w.answer(r, err)
}

// Do answers in under the lock lockKey alone, without idempotency; budget is as
// Request.Budget. As Run's, its answer is handed over as soon as its batch has run: the request
// that leads the batch (alone, the usual case) goes on its own goroutine, which releases the
// lock after the answer, not before it.
func (l *Lane[In, Out]) Do(ctx context.Context, lockKey string, budget *Budget, in In) (Out, error) {
	w := l.newWaiter(ctx, in, admittedAlready)
	w.budget = budget
	go func() {
		r, err := combine.Safely(func() (reply[Out], error) { return l.do(ctx, lockKey, w) })
		w.answer(r, err)
	}()
	<-w.answered
	return w.reply.value, w.err
}

// admittedAlready is the admission of a request without idempotency: nothing to wait for.
var admittedAlready = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (l *Lane[In, Out]) newWaiter(ctx context.Context, in In, admitted chan struct{}) *waiter[In, Out] {
	return &waiter[In, Out]{
		in: in, admitted: admitted, answered: make(chan struct{}),
		ref: l.g.tracer.Ref(ctx), enqueued: l.g.deps.Clock.Now(),
	}
}

// do queues w behind lockKey until a batch or its line has answered it. Its wait is a span
// that ends when its turn to lead comes (lock) or with its answer.
func (l *Lane[In, Out]) do(ctx context.Context, lockKey string, w *waiter[In, Out]) (reply[Out], error) {
	_, w.wait = l.g.tracer.Start(ctx, spanLaneWait)
	w.answer(l.lines.Do(ctx, lockKey, w))
	return w.reply, w.err
}

// endWait ends w's wait span once: on w's own goroutine when its turn to lead comes, else with
// its answer.
func (w *waiter[In, Out]) endWait(err error) {
	if w.wait != nil {
		w.wait.End(err)
		w.wait = nil
	}
}

// waiter is one request in a lane.
type waiter[In, Out any] struct {
	in In
	// admitted is closed once Run has taken the request's idempotency key (ticket) or been
	// refused it (refused); ticket stays nil without idempotency.
	admitted chan struct{}
	ticket   *ticket
	refused  bool
	// storeDown is the store's failure when the key was refused because it did not answer.
	storeDown error
	// ref is the request's span: a batch this request is served in but does not lead (the
	// batch span is the leader's child) links to it.
	ref      ports.SpanRef
	wait     ports.Span // the span of its wait in line; nil once ended
	enqueued time.Time
	budget   *Budget // Request.Budget; nil: none
	// answered is closed once reply or err holds the request's answer: from its batch, before
	// the lock is released, or from its line (a lock not taken, a queue failed, a line left).
	answered chan struct{}
	once     sync.Once
	reply    reply[Out]
	err      error
}

// admit records the outcome of taking the key: t when Run owns it, nil when refused by err,
// kept when it is the store not answering.
func (w *waiter[In, Out]) admit(t *ticket, err error) {
	w.ticket, w.refused = t, t == nil
	if errors.Is(err, ports.ErrUnavailable) {
		w.storeDown = err
	}
	close(w.admitted)
}

// answer hands w its answer; only the first counts.
func (w *waiter[In, Out]) answer(r reply[Out], err error) {
	w.once.Do(func() {
		w.reply, w.err = r, err
		w.endWait(err)
		close(w.answered)
	})
}

// reply is what a batch gave one request that it did not refuse.
type reply[Out any] struct {
	value  Out
	body   []byte                // value encoded, for the idempotency record
	replay *ports.StoredResponse // a marker committed earlier answers instead
	// storeDown: the batch waited for a neighbour's begin that the store did not answer, so
	// the record is written in the background rather than after a second timeout.
	storeDown bool
}

// lockStoreError is a failure of the lock's store to take or release a lock. The idempotency
// records of the requests it answers, kept in the same store, are then written in the
// background rather than before their answers.
type lockStoreError struct{ err error }

func (e *lockStoreError) Error() string { return e.err.Error() }
func (e *lockStoreError) Unwrap() error { return e.err }

func isLockStoreDown(err error) bool {
	var down *lockStoreError
	return errors.As(err, &down)
}

// lock is the lane's combine.Gate: it takes lockKey for the head of the queue before its batch
// is taken, so the requests that queue while it waits join the batch, and returns the release.
func (l *Lane[In, Out]) lock(ctx context.Context, lockKey string, head *waiter[In, Out]) (func() error, error) {
	head.endWait(nil)
	lock, err := l.acquire(ctx, lockKey, head.enqueued)
	if err != nil {
		return nil, err
	}
	return func() error {
		releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.g.cfg.ReleaseTimeout)
		defer cancel()
		// ErrLockNotHeld means the TTL ran out mid-batch; the database kept the invariant.
		if err := lock.Release(releaseCtx); errors.Is(err, ports.ErrUnavailable) {
			return &lockStoreError{fmt.Errorf("guard: unlock %s: %w", lockKey, err)}
		}
		return nil
	}, nil
}

// acquire takes lockKey for a head queued since `since`. After each failed attempt it waits
// BaseDelay × 2^n plus jitter, or less when the key is released meanwhile; it gives up with
// the lane's Busy error when the request's budget from `since` is spent, or, without a
// LockWait, after MaxRetries full waits.
func (l *Lane[In, Out]) acquire(ctx context.Context, lockKey string, since time.Time) (_ ports.Lock, err error) {
	g := l.g
	attempts := 0
	ctx, span := g.tracer.Start(ctx, spanLockAcquire)
	defer func() { endLockSpan(span, lockKey, attempts, err) }()
	budget, maxBackoffs := g.lockBudget(), g.cfg.MaxRetries
	if l.cfg.LockWait > 0 {
		budget, maxBackoffs = l.cfg.LockWait, -1
	}
	deadline := since.Add(budget)
	released, stop := g.deps.Locker.Released(lockKey)
	defer func() { stop() }()
	for backoffs := 0; ; {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("guard: waiting for lock %s: %w", lockKey, err)
		}
		attempts++
		lock, err := g.deps.Locker.TryAcquire(ctx, lockKey, l.cfg.LockTTL)
		if err == nil {
			g.observer.LockAcquired(lockKey, attempts, g.deps.Clock.Now().Sub(since))
			return lock, nil
		}
		// The head left (its key was refused, or its client went): that is not the store failing,
		// so the line is handed on rather than failed.
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("guard: waiting for lock %s: %w", lockKey, ctxErr)
		}
		if errors.Is(err, ports.ErrUnavailable) {
			return nil, &lockStoreError{fmt.Errorf("guard: lock %s: %w", lockKey, err)}
		}
		if !errors.Is(err, ports.ErrLockNotAcquired) {
			return nil, fmt.Errorf("guard: lock %s: %w", lockKey, err)
		}
		now := g.deps.Clock.Now()
		if backoffs == maxBackoffs || !now.Before(deadline) {
			g.observer.LockExhausted(lockKey)
			busy := *l.cfg.Busy
			busy.RetryAfter = l.cfg.LockTTL
			return nil, &busy
		}
		woken, err := l.wait(ctx, min(g.Backoff(backoffs), deadline.Sub(now)), released)
		if err != nil {
			return nil, fmt.Errorf("guard: waiting for lock %s: %w", lockKey, err)
		}
		if woken {
			// A release notice is a chance, not a wait served: the schedule does not advance.
			stop()
			released, stop = g.deps.Locker.Released(lockKey)
			continue
		}
		backoffs++
	}
}

// wait sleeps for d, ending early when released is closed; it reports whether that woke it.
func (l *Lane[In, Out]) wait(ctx context.Context, d time.Duration, released <-chan struct{}) (bool, error) {
	sleepCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-released:
			cancel()
		case <-sleepCtx.Done():
		}
	}()
	if err := l.g.deps.Sleeper.Sleep(sleepCtx, d); err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return true, nil
	}
	return false, nil
}

// served is a batch's answers to its requests, one each, in order.
type served[Out any] = []Answer[reply[Out]]

// errRefused answers, for form's sake, a request whose key was refused after it was taken into
// a batch: Run has already answered it.
var errRefused = errors.New("guard: the request's idempotency key was refused")

// serve is the lane's combine.Func. It waits until each request of the batch has its key taken
// or refused (Run takes it while the request queues), serves those whose key was taken, and
// hands each request its answer at once, before the lock is released.
func (l *Lane[In, Out]) serve(ctx context.Context, lockKey string, batch []*waiter[In, Out]) (served[Out], error) {
	answers := make(served[Out], len(batch))
	admitted := make([]*waiter[In, Out], 0, len(batch))
	// A neighbour's key the store did not answer cost this batch one of its timeouts: the
	// batch's records are written in the background and the queue behind it is failed at once,
	// as when the lock's store fails, so no request waits for a second timeout.
	var storeDown error
	for i, w := range batch {
		<-w.admitted
		if w.refused {
			answers[i].Err = errRefused
			if w.storeDown != nil {
				storeDown = &lockStoreError{fmt.Errorf("guard: idempotency key in lane %s: %w", lockKey, w.storeDown)}
			}
			continue
		}
		admitted = append(admitted, w)
	}
	var err error
	if len(admitted) > 0 {
		var results served[Out]
		// The batch span is the leader's child (batch[0]'s), linked to every other it serves.
		others := admitted
		if admitted[0] == batch[0] {
			others = admitted[1:]
		}
		results, err = l.serveAdmitted(ctx, lockKey, admitted, servedLinks(others))
		j := 0
		for i := range batch {
			if answers[i].Err == nil {
				answers[i] = results[j]
				answers[i].Value.storeDown = storeDown != nil
				j++
			}
		}
	}
	for i, w := range batch {
		w.answer(answers[i].Value, answers[i].Err)
	}
	if err == nil {
		err = storeDown
	}
	return answers, err
}

// serveAdmitted answers a batch all together, or, when that fails as a whole, each request
// alone. A failure wrapping ports.ErrUnavailable is not re-run: it answers the requests not yet
// served and is returned, for the queue behind the batch.
func (l *Lane[In, Out]) serveAdmitted(ctx context.Context, lockKey string, batch []*waiter[In, Out], links []ports.SpanRef) (_ served[Out], err error) {
	defer l.g.observer.BatchServed(lockKey, len(batch))
	// ctx is the leader's, without its cancellation.
	ctx, cancel := withinBudgets(ctx, batch)
	defer cancel()
	ctx, span := l.g.tracer.Start(ctx, spanBatch, links...)
	span.SetInt(attrBatchSize, len(batch))
	defer func() { span.End(err) }()
	answers, err := l.attemptRetrying(ctx, batch, false)
	if err == nil {
		return answers, nil
	}
	answers = make(served[Out], len(batch))
	if errors.Is(err, ports.ErrUnavailable) {
		failFrom(answers, 0, err)
		return answers, err
	}
	// Alone, each request can fail only itself, and it looks its marker up first: the failure
	// may be a request answered before (a marker conflict, or a unique key its first run wrote).
	for i := range batch {
		one, err := l.attemptRetrying(ctx, batch[i:i+1], true)
		if errors.Is(err, ports.ErrUnavailable) {
			failFrom(answers, i, err)
			return answers, err
		}
		if err != nil {
			answers[i].Err = err
			continue
		}
		answers[i] = one[0]
	}
	return answers, nil
}

// withinBudgets bounds a batch starting now, its re-runs included, by the earliest deadline of
// its requests' budgets (see Budget), as a combined call runs until the earliest deadline of its
// batch: every request then answers within its own budget. The other way, answering the
// requests with less left 503 before the batch so the rest run longer, needs a threshold to
// guess, and gains little: a request whose reads spent most of its budget met a slow database,
// which the batch would meet too; with the database fast, reads cost milliseconds and every
// request has nearly its whole budget left.
func withinBudgets[In, Out any](ctx context.Context, batch []*waiter[In, Out]) (context.Context, context.CancelFunc) {
	start := time.Now()
	var earliest time.Time
	for _, w := range batch {
		if w.budget != nil {
			earliest = earlier(earliest, w.budget.deadline(start))
		}
	}
	return until(ctx, earliest)
}

// earlier is the earlier of two deadlines, zero meaning none.
func earlier(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// until bounds ctx by deadline, unless it is zero.
func until(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	if deadline.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, deadline)
}

// failFrom answers every request of answers from the i-th on with err.
func failFrom[Out any](answers served[Out], i int, err error) {
	for j := i; j < len(answers); j++ {
		answers[j] = Answer[reply[Out]]{Err: err}
	}
}

// attemptRetrying is attempt, run again after a version conflict as LaneConfig.ConflictRetries
// says; the conflict that outlasts the retries answers every request of the batch.
func (l *Lane[In, Out]) attemptRetrying(ctx context.Context, batch []*waiter[In, Out], findFirst bool) (served[Out], error) {
	for retry := 0; ; retry++ {
		answers, err := l.attempt(ctx, batch, findFirst)
		if l.cfg.ConflictRetries <= 0 || !errors.Is(err, ports.ErrVersionConflict) {
			return answers, err
		}
		if retry == l.cfg.ConflictRetries {
			answers = make(served[Out], len(batch))
			failFrom(answers, 0, err)
			return answers, nil
		}
	}
}

// attempt runs the batch function once for batch, inside a transaction that also commits the
// idempotency markers when the lane keeps them. A panic in the batch function fails the attempt
// rather than the process, so a request that panics is run alone like any other failure.
func (l *Lane[In, Out]) attempt(ctx context.Context, batch []*waiter[In, Out], findFirst bool) (served[Out], error) {
	return combine.Safely(func() (served[Out], error) {
		if !l.cfg.Markers {
			return l.runBatch(ctx, batch)
		}
		if l.shared != nil && !findFirst {
			answers, err := l.attemptShared(ctx, batch)
			if !errors.Is(err, errSharedRolledBack) {
				return answers, err
			}
		}
		var answers served[Out]
		err := l.g.deps.Tx.InTx(ctx, func(ctx context.Context) error {
			var err error
			answers, err = l.runMarked(ctx, batch, findFirst)
			return err
		})
		if findFirst && errors.Is(err, ports.ErrMarkerExists) {
			// A request with the same key committed meanwhile; its retry will be replayed.
			return nil, ErrInProgress
		}
		return answers, err
	})
}

// attemptShared is attempt's first run of batch, in a transaction it may share with the batches
// of other keys (LaneConfig.SharedTransactions).
func (l *Lane[In, Out]) attemptShared(ctx context.Context, batch []*waiter[In, Out]) (served[Out], error) {
	var answers served[Out]
	deadline, _ := ctx.Deadline()
	_, err := l.shared.Do(ctx, struct{}{}, sharedRun{deadline: deadline, run: func(ctx context.Context) error {
		var err error
		answers, err = l.runMarked(ctx, batch, false)
		return err
	}})
	if err != nil && ctx.Err() != nil && !errors.Is(err, ports.ErrUnavailable) {
		// Its budget ran out in the line for a shared transaction: the database, busy with the
		// transactions ahead, did not serve it in time.
		return nil, fmt.Errorf("guard: waiting for a shared transaction: %w: %w", ports.ErrUnavailable, err)
	}
	return answers, err
}

// serveShared is the shared combiner's combine.Func: it runs the batches one after another in
// one transaction. A failure of one rolls them all back; alone it answers its batch as it is,
// shared it sends each batch to run again on its own, unless it wraps ports.ErrUnavailable: a
// database that did not answer would only be waited for once more.
func (l *Lane[In, Out]) serveShared(ctx context.Context, _ struct{}, runs []sharedRun) ([]Answer[struct{}], error) {
	// The transaction ends by the earliest deadline of its batches, as a batch by its requests'.
	var earliest time.Time
	for _, run := range runs {
		earliest = earlier(earliest, run.deadline)
	}
	ctx, cancel := until(ctx, earliest)
	defer cancel()
	err := l.g.deps.Tx.InTx(ctx, func(ctx context.Context) error {
		for _, run := range runs {
			if _, err := combine.Safely(func() (struct{}, error) { return struct{}{}, run.run(ctx) }); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case err == nil:
		return make([]Answer[struct{}], len(runs)), nil
	case len(runs) == 1 || errors.Is(err, ports.ErrUnavailable):
		return nil, err
	default:
		return nil, fmt.Errorf("%w: %w", errSharedRolledBack, err)
	}
}

// runMarked runs the batch and stores a marker for each success, inside the batch's
// transaction. A request that already has a marker is answered from it: looked up before running
// when findFirst, else after, and only for requests the run rejected — a success whose marker
// exists fails the transaction with ports.ErrMarkerExists (from the Save, or from the statement
// or commit an adapter held the Save back for), which rolls the whole batch back. So the common
// case, all successes, costs no read.
func (l *Lane[In, Out]) runMarked(ctx context.Context, batch []*waiter[In, Out], findFirst bool) (served[Out], error) {
	answers := make(served[Out], len(batch))
	pending := make([]int, 0, len(batch))
	if findFirst {
		stored, err := l.findMarkers(ctx, batch, func(int) bool { return true })
		if err != nil {
			return nil, err
		}
		for i, w := range batch {
			if m, ok := stored[i]; ok {
				answers[i] = answerFromMarker[In, Out](w, m)
				continue
			}
			pending = append(pending, i)
		}
	} else {
		for i := range batch {
			pending = append(pending, i)
		}
	}
	if len(pending) == 0 {
		return answers, nil
	}
	run := make([]*waiter[In, Out], len(pending))
	for j, i := range pending {
		run[j] = batch[i]
	}
	results, err := l.runBatch(ctx, run)
	if err != nil {
		return nil, err
	}
	for j, i := range pending {
		answers[i] = results[j]
	}
	if !findFirst {
		stored, err := l.findMarkers(ctx, batch, func(i int) bool { return answers[i].Err != nil })
		if err != nil {
			return nil, err
		}
		for i, m := range stored {
			answers[i] = answerFromMarker[In, Out](batch[i], m)
		}
	}
	now := l.g.deps.Clock.Now()
	var markers []ports.IdempotencyMarker
	for _, i := range pending {
		if t := batch[i].ticket; t != nil && answers[i].Err == nil && answers[i].Value.replay == nil {
			markers = append(markers, ports.IdempotencyMarker{
				Key:         t.key,
				Fingerprint: t.fingerprint,
				Response:    ports.StoredResponse{Outcome: string(t.outcome), Body: answers[i].Value.body},
				CreatedAt:   now,
			})
		}
	}
	if len(markers) > 0 {
		saveCtx, span := l.g.tracer.Start(ctx, spanMarkersSave)
		span.SetInt(attrMarkers, len(markers))
		err := l.g.deps.Markers.Save(saveCtx, markers)
		span.End(err)
		if err != nil {
			return nil, fmt.Errorf("guard: save idempotency markers: %w", err)
		}
	}
	return answers, nil
}

// findMarkers reads the markers of the requests of batch that carry a key and are selected, in
// one read, by their index in batch.
func (l *Lane[In, Out]) findMarkers(ctx context.Context, batch []*waiter[In, Out], selected func(i int) bool) (map[int]ports.IdempotencyMarker, error) {
	var keys []ports.IdempotencyKey
	for i, w := range batch {
		if w.ticket != nil && selected(i) {
			keys = append(keys, w.ticket.key)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	stored, err := l.g.deps.Markers.Find(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("guard: find idempotency markers: %w", err)
	}
	byIndex := make(map[int]ports.IdempotencyMarker, len(stored))
	for i, w := range batch {
		if w.ticket == nil || !selected(i) {
			continue
		}
		if m, ok := stored[w.ticket.key]; ok {
			byIndex[i] = m
		}
	}
	return byIndex, nil
}

// answerFromMarker answers w with the response an earlier request with its key committed.
func answerFromMarker[In, Out any](w *waiter[In, Out], m ports.IdempotencyMarker) Answer[reply[Out]] {
	if m.Fingerprint != w.ticket.fingerprint {
		return Answer[reply[Out]]{Err: ErrKeyReused}
	}
	return Answer[reply[Out]]{Value: reply[Out]{replay: &m.Response}}
}

// runBatch calls the batch function and encodes each success for the idempotency record.
func (l *Lane[In, Out]) runBatch(ctx context.Context, batch []*waiter[In, Out]) (served[Out], error) {
	inputs := make([]In, len(batch))
	for i, w := range batch {
		inputs[i] = w.in
	}
	results, err := l.run(ctx, inputs)
	if err != nil {
		return nil, err
	}
	if len(results) != len(batch) {
		return nil, fmt.Errorf("guard: batch function answered %d of %d requests", len(results), len(batch))
	}
	answers := make(served[Out], len(batch))
	for i, r := range results {
		if r.Err != nil {
			answers[i].Err = r.Err
			continue
		}
		body, err := json.Marshal(r.Value)
		if err != nil {
			return nil, fmt.Errorf("guard: encode response: %w", err)
		}
		answers[i].Value = reply[Out]{value: r.Value, body: body}
	}
	return answers, nil
}
