package guard_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/ports"
)

// countingTx is a TxRunner that counts the transactions it begins (a call inside one joins it).
type countingTx struct {
	inner ports.TxRunner
	begun atomic.Int32
}

type countingTxKey struct{}

func (c *countingTx) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if ctx.Value(countingTxKey{}) != nil {
		return c.inner.InTx(ctx, fn)
	}
	c.begun.Add(1)
	return c.inner.InTx(ctx, func(ctx context.Context) error {
		return fn(context.WithValue(ctx, countingTxKey{}, true))
	})
}

// sharedLane is a lane of SharedTransactions 1 on f whose batch function is r, each request
// under a lock key of its own; its transactions are counted.
func sharedLane(f *fixture, r *recorder) (*guard.Lane[int, answer], *countingTx) {
	tx := &countingTx{inner: f.db}
	deps := f.deps()
	deps.Tx = tx
	lane := guard.NewLane(newGuard(deps, guard.Config{}), guard.LaneConfig{Markers: true, SharedTransactions: 1}, r.serve)
	return lane, tx
}

// ownKeyRequest is request i under a lock key of its own.
func ownKeyRequest(i int) guard.Request {
	req := request(key(i))
	req.LockKey = fmt.Sprintf("thing:%d", i)
	return req
}

// runWhileZeroIsOut runs request 0 on lane, whose batch function holds it until gate closes,
// then requests 1 to n-1, each under its own lock key, and returns once every one is answered.
// Inside a synctest bubble, every later request is waiting for the one shared transaction
// (held by request 0's) when gate closes.
func runWhileZeroIsOut(lane *guard.Lane[int, answer], gate chan struct{}, n int) []outcome {
	outcomes := make([]outcome, n)
	var wg sync.WaitGroup
	run := func(i int) {
		wg.Go(func() {
			res, err := lane.Run(context.Background(), ownKeyRequest(i), i)
			outcomes[i] = outcome{res, err}
		})
	}
	run(0)
	synctest.Wait()
	for i := 1; i < n; i++ {
		run(i)
	}
	synctest.Wait()
	close(gate)
	wg.Wait()
	return outcomes
}

// holdZero is a recorder's fail function that holds request 0's batch until gate closes.
func holdZero(gate chan struct{}, then func(batch []int) error) func(batch []int) error {
	return func(batch []int) error {
		if batch[0] == 0 {
			<-gate
		}
		if then != nil {
			return then(batch)
		}
		return nil
	}
}

// sortedCalls is the recorder's batches in input order: the batches sharing a transaction run in
// the order they reached it, which the scheduler picks.
func sortedCalls(r *recorder) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	batches := slices.Clone(r.batches)
	slices.SortStableFunc(batches, func(a, b []int) int { return a[0] - b[0] })
	return fmt.Sprint(batches)
}

// Batches of different keys that become ready while the one shared transaction is out run
// together in the next: four batches cost two transactions, each request keeps its own answer
// and its own committed marker.
func TestLane_BatchesOfDifferentKeysReadyTogetherShareOneTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		gate := make(chan struct{})
		r := &recorder{fail: holdZero(gate, nil)}
		lane, tx := sharedLane(f, r)

		outcomes := runWhileZeroIsOut(lane, gate, 4)
		if got := sortedCalls(r); got != "[[0] [1] [2] [3]]" {
			t.Fatalf("batches %s, want one per key", got)
		}
		if got := tx.begun.Load(); got != 2 {
			t.Fatalf("%d transactions, want 2: request 0's, then one shared by 1, 2 and 3", got)
		}
		for i, o := range outcomes {
			if o.err != nil || o.res.Replayed || o.res.Value.N != i {
				t.Fatalf("request %d: %+v, %v", i, o.res, o.err)
			}
			req := ownKeyRequest(i)
			stored, err := f.markers.Find(context.Background(), []ports.IdempotencyKey{{Scope: req.UserID, Key: req.IdempotencyKey}})
			if err != nil || len(stored) != 1 {
				t.Fatalf("request %d's marker: %v, %v", i, stored, err)
			}
		}
	})
}

// One batch failing rolls its shared transaction back, and every batch of it runs again alone:
// its neighbours succeed (their markers, rolled back with the shared transaction, are saved
// again without a conflict) and only the bad request fails.
func TestLane_ASharedTransactionThatFailsRunsEachBatchAgainAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		gate := make(chan struct{})
		errConstraint := errors.New("constraint violated")
		r := &recorder{fail: holdZero(gate, func(batch []int) error {
			if batch[0] == 2 {
				return errConstraint
			}
			return nil
		})}
		lane, _ := sharedLane(f, r)

		outcomes := runWhileZeroIsOut(lane, gate, 4)
		for i, o := range outcomes {
			if i == 2 {
				if !errors.Is(o.err, errConstraint) {
					t.Fatalf("the bad request: %+v, %v", o.res, o.err)
				}
				assertKeyFree(t, f, ownKeyRequest(i))
				continue
			}
			if o.err != nil || o.res.Replayed || o.res.Value.N != i {
				t.Fatalf("request %d: %+v, %v", i, o.res, o.err)
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		runs := map[int]int{}
		for _, b := range r.batches {
			runs[b[0]]++
		}
		// 2 runs shared, alone, then alone again as a single request; 1 and 3 ran at most once
		// shared (the shared run stops at 2) and once alone.
		if runs[0] != 1 || runs[2] != 3 || runs[1] < 1 || runs[1] > 2 || runs[3] < 1 || runs[3] > 2 {
			t.Fatalf("runs per request %v (batches %v)", runs, r.batches)
		}
	})
}

// A shared transaction that fails because the database did not answer is not run again, shared
// or alone: every batch in it answers that error at once.
func TestLane_ASharedTransactionTheDatabaseDidNotAnswerFailsEveryBatchInItAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		gate := make(chan struct{})
		r := &recorder{fail: holdZero(gate, func(batch []int) error {
			if batch[0] != 0 {
				return errDependencyDown
			}
			return nil
		})}
		lane, tx := sharedLane(f, r)

		outcomes := runWhileZeroIsOut(lane, gate, 4)
		if o := outcomes[0]; o.err != nil || o.res.Value.N != 0 {
			t.Fatalf("request 0: %+v, %v", o.res, o.err)
		}
		for i := 1; i < 4; i++ {
			if o := outcomes[i]; !errors.Is(o.err, ports.ErrUnavailable) {
				t.Fatalf("request %d: %+v, %v", i, o.res, o.err)
			}
			assertKeyFree(t, f, ownKeyRequest(i))
		}
		if got := tx.begun.Load(); got != 2 {
			t.Fatalf("%d transactions, want 2: nothing runs again after the database did not answer", got)
		}
		if got := r.calls(); len(got) != len("[[0] [1]]") {
			t.Errorf("batches %s, want request 0's and the first of the shared transaction's", got)
		}
	})
}
