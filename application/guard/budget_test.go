package guard_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/ports"
)

// spentBudget is a budget of total of which spent has gone on reads before the lane, in a
// synctest bubble, where the sleep takes exactly spent.
func spentBudget(total, spent time.Duration) *guard.Budget {
	b := guard.NewBudget(total)
	_, done := b.Spend(context.Background())
	time.Sleep(spent)
	done()
	return b
}

// batchDeadlines is a batch function that answers each request with its input and records, per
// batch, when it started and the deadline its context carried.
type batchDeadlines struct {
	mu      sync.Mutex
	started []time.Time
	until   []time.Time // zero: no deadline
}

func (d *batchDeadlines) serve(ctx context.Context, batch []int) ([]guard.Answer[answer], error) {
	deadline, _ := ctx.Deadline()
	d.mu.Lock()
	d.started, d.until = append(d.started, time.Now()), append(d.until, deadline)
	d.mu.Unlock()
	answers := make([]guard.Answer[answer], len(batch))
	for i, in := range batch {
		answers[i].Value = answer{N: in}
	}
	return answers, nil
}

// TestLane_WaitingForTheLockSpendsNoneOfARequestsBudget: a request that spent 300 ms of its
// 1 s budget on reads, then waited 2 s for the lock, runs its batch until 700 ms after the batch
// starts, not until 1 s after its arrival, long passed.
func TestLane_WaitingForTheLockSpendsNoneOfARequestsBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		d := &batchDeadlines{}
		lane := guard.NewLane(f.parkedGuard(guard.Config{}), guard.LaneConfig{Markers: true}, d.serve)
		holder := f.hold(t, lockKey)
		req := request("k1")
		req.Budget = spentBudget(time.Second, 300*time.Millisecond)
		done := f.enqueue(t, context.Background(), func(ctx context.Context) (guard.Result[answer], error) {
			return lane.Run(ctx, req, 1)
		})
		time.Sleep(2 * time.Second)
		if err := holder.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if o := await(t, done); o.err != nil {
			t.Fatal(o.err)
		}
		if len(d.until) != 1 || !d.until[0].Equal(d.started[0].Add(700*time.Millisecond)) {
			t.Fatalf("batches started at %v ran until %v, want the start + 700ms", d.started, d.until)
		}
	})
}

// TestLane_ABatchEndsByTheEarliestBudgetOfItsRequests: a batch serving a request with its whole
// 1 s budget left, one with 400 ms left and one without a budget runs until 400 ms after it
// starts, so each of its requests answers within its own budget.
func TestLane_ABatchEndsByTheEarliestBudgetOfItsRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		d := &batchDeadlines{}
		lane := guard.NewLane(f.parkedGuard(guard.Config{}), guard.LaneConfig{Markers: true}, d.serve)
		holder := f.hold(t, lockKey)
		budgets := []*guard.Budget{guard.NewBudget(time.Second), spentBudget(time.Second, 600*time.Millisecond), nil}
		pending := make([]<-chan outcome, len(budgets))
		for i, budget := range budgets {
			req := request(key(i))
			req.Budget = budget
			pending[i] = f.enqueue(t, context.Background(), func(ctx context.Context) (guard.Result[answer], error) {
				return lane.Run(ctx, req, i)
			})
		}
		if err := holder.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i := range pending {
			if o := await(t, pending[i]); o.err != nil {
				t.Fatalf("request %d: %v", i, o.err)
			}
		}
		if len(d.until) != 1 || !d.until[0].Equal(d.started[0].Add(400*time.Millisecond)) {
			t.Fatalf("batches started at %v ran until %v, want one, until its start + 400ms", d.started, d.until)
		}
	})
}

// TestLane_ALockHeldPastARequestsBudgetAnswersBusyNotUnavailable: contention is answered as
// contention. A request with a 1 s budget whose lock is held for the whole backoff schedule
// (3.1 s without jitter) waits it out and answers ErrBusy (429), not a timeout (503), and runs nothing.
func TestLane_ALockHeldPastARequestsBudgetAnswersBusyNotUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		deps := f.deps()
		deps.Clock, deps.Sleeper = system.Clock{}, system.Sleeper{}
		d := &batchDeadlines{}
		lane := guard.NewLane(newGuard(deps, guard.Config{}), guard.LaneConfig{Markers: true}, d.serve)
		f.hold(t, lockKey)
		req := request("k1")
		req.Budget = guard.NewBudget(time.Second)
		sent := time.Now()
		_, err := lane.Run(context.Background(), req, 1)
		if !errors.Is(err, guard.ErrBusy) || errors.Is(err, ports.ErrUnavailable) || len(d.started) != 0 {
			t.Fatalf("after %v: %v, %d batches; want ErrBusy and none", time.Since(sent), err, len(d.started))
		}
		if waited := time.Since(sent); waited < 3100*time.Millisecond {
			t.Fatalf("gave up after %v, want the whole backoff schedule", waited)
		}
	})
}

// deadlineTx is a TxRunner that records the deadline of each transaction it begins (a call
// inside one joins it).
type deadlineTx struct {
	inner ports.TxRunner
	mu    sync.Mutex
	until []time.Time
}

type deadlineTxKey struct{}

func (d *deadlineTx) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if ctx.Value(deadlineTxKey{}) == nil {
		deadline, _ := ctx.Deadline()
		d.mu.Lock()
		d.until = append(d.until, deadline)
		d.mu.Unlock()
		ctx = context.WithValue(ctx, deadlineTxKey{}, true)
	}
	return d.inner.InTx(ctx, fn)
}

// TestLane_ASharedTransactionEndsByTheEarliestBudgetOfItsBatches: batches of three keys, with
// 1 s, 700 ms and 400 ms of their requests' budgets left, wait together for the one shared
// transaction, then run in it until 400 ms after they started.
func TestLane_ASharedTransactionEndsByTheEarliestBudgetOfItsBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		gate := make(chan struct{})
		tx := &deadlineTx{inner: f.db}
		deps := f.deps()
		deps.Tx = tx
		r := &recorder{fail: holdZero(gate, nil)}
		lane := guard.NewLane(newGuard(deps, guard.Config{}), guard.LaneConfig{Markers: true, SharedTransactions: 1}, r.serve)
		budgets := []*guard.Budget{nil, guard.NewBudget(time.Second),
			spentBudget(time.Second, 300*time.Millisecond), spentBudget(time.Second, 600*time.Millisecond)}
		start := time.Now()

		var wg sync.WaitGroup
		for i, budget := range budgets {
			req := ownKeyRequest(i)
			req.Budget = budget
			wg.Go(func() {
				if _, err := lane.Run(context.Background(), req, i); err != nil {
					t.Errorf("request %d: %v", i, err)
				}
			})
			synctest.Wait()
		}
		close(gate)
		wg.Wait()
		if len(tx.until) != 2 || !tx.until[0].IsZero() || !tx.until[1].Equal(start.Add(400*time.Millisecond)) {
			t.Fatalf("transactions until %v (from %v), want request 0's without a deadline, then one until 400ms after", tx.until, start)
		}
	})
}

// TestLane_ABatchWhoseBudgetRunsOutWaitingForASharedTransactionAnswersUnavailable: a batch with
// 1 s of budget, waiting for the one shared transaction, which another batch holds for 2 s,
// answers ErrUnavailable (503) once its budget is spent: the database did not serve it in time.
func TestLane_ABatchWhoseBudgetRunsOutWaitingForASharedTransactionAnswersUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		gate := make(chan struct{})
		r := &recorder{fail: holdZero(gate, nil)}
		lane := guard.NewLane(f.guard(guard.Config{}), guard.LaneConfig{Markers: true, SharedTransactions: 1}, r.serve)
		go func() {
			if _, err := lane.Run(context.Background(), ownKeyRequest(0), 0); err != nil {
				t.Errorf("request 0: %v", err)
			}
		}()
		synctest.Wait()
		req := ownKeyRequest(1)
		req.Budget = guard.NewBudget(time.Second)
		sent := time.Now()
		_, err := lane.Run(context.Background(), req, 1)
		if waited := time.Since(sent); !errors.Is(err, ports.ErrUnavailable) || waited != time.Second {
			t.Fatalf("after %v: %v, want ErrUnavailable after its 1s budget", waited, err)
		}
		close(gate)
		synctest.Wait()
	})
}
