package porttest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
)

// TestTxRunner checks ports.TxRunner through the crew repositories: a commit makes the writes
// visible, and nothing is visible outside before it; fn's error rolls back and comes back
// unchanged; a nested InTx joins the outer transaction; a transaction whose context ends before
// the commit is not committed and InTx says so. With Capabilities.NewStoresWithTxTimeout it also
// checks that the backend's own bound ends a wait for a row lock and a transaction that overran
// it, with ports.ErrUnavailable.
func TestTxRunner(t *testing.T, newStores func(t *testing.T) ports.Stores, caps Capabilities) {
	run(t, newStores, caps, []testCase[ports.Stores]{
		{"CommitMakesWritesVisible", testTxCommitMakesWritesVisible},
		{"ErrorRollsBackAndIsReturnedUnchanged", testTxErrorRollsBack},
		{"NestedInTxJoinsOuter", testTxNestedJoinsOuter},
		{"EndedContextIsNotCommitted", testTxEndedContextIsNotCommitted},
		{"TxTimeout/BoundsRowLockWait", testTxTimeoutBoundsRowLockWait},
		{"TxTimeout/OverrunIsUnavailable", testTxTimeoutOverrunIsUnavailable},
	})
}

func testTxCommitMakesWritesVisible(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c, err := crew.New(randomID(), "committed", 5, now())
	must(t, err, "new crew")
	userID := newUserID()

	err = e.impl.Tx.InTx(ctx, func(txCtx context.Context) error {
		if err := e.impl.Crews.Create(txCtx, c); err != nil {
			return err
		}
		m, err := c.Join(userID, now())
		if err != nil {
			return err
		}
		if err := e.impl.Crews.Save(txCtx, c); err != nil {
			return err
		}
		if err := e.impl.CrewMembers.Add(txCtx, m); err != nil {
			return err
		}
		_, err = e.impl.Crews.Get(ctx, c.ID())
		expectIs(t, err, crew.ErrNotFound, "outside the transaction before the commit")
		return nil
	})
	must(t, err, "InTx")

	currentMembers, members := storedCount(t, e.impl, c.ID())
	expectEqual(t, currentMembers, 1, "stored count")
	expectEqual(t, members, 1, "member rows")
	expectEqual(t, existing(t, e.impl, c.ID(), userID)[userID], true, "member committed")
}

func testTxErrorRollsBack(t *testing.T, e env[ports.Stores]) {
	for _, fnErr := range []error{
		errors.New("plain failure"),
		fmt.Errorf("join: %w", crew.ErrFull),
	} {
		t.Run(fnErr.Error(), func(t *testing.T) {
			ctx := context.Background()
			c, err := crew.New(randomID(), "rolled back", 5, now())
			must(t, err, "new crew")

			err = e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
				must(t, e.impl.Crews.Create(ctx, c), "create")
				m, err := c.Join(newUserID(), now())
				must(t, err, "join")
				must(t, e.impl.CrewMembers.Add(ctx, m), "add")
				return fnErr
			})

			if err != fnErr { //nolint:errorlint // "unchanged": fn's very error, not one wrapping it
				t.Errorf("InTx returned %v, want fn's error unchanged", err)
			}
			_, err = e.impl.Crews.Get(ctx, c.ID())
			expectIs(t, err, crew.ErrNotFound, "crew after rollback")
			count, err := e.impl.CrewMembers.Count(ctx, c.ID())
			must(t, err, "count")
			expectEqual(t, count, 0, "members after rollback")
		})
	}
}

func testTxNestedJoinsOuter(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c, err := crew.New(randomID(), "nested", 5, now())
	must(t, err, "new crew")
	userID := newUserID()
	abort := errors.New("abort outer")

	err = e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
		if err := e.impl.Crews.Create(ctx, c); err != nil {
			return err
		}
		innerErr := e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
			// Only the outer transaction can see, and lock, the crew it has not committed.
			locked, err := e.impl.Crews.GetForUpdate(ctx, c.ID())
			if err != nil {
				return err
			}
			m, err := locked.Join(userID, now())
			if err != nil {
				return err
			}
			return e.impl.CrewMembers.Add(ctx, m)
		})
		must(t, innerErr, "inner InTx")
		return abort
	})
	if !errors.Is(err, abort) {
		t.Fatalf("InTx returned %v, want the outer fn's error", err)
	}

	// The inner InTx committed nothing of its own: the outer rollback undid its write too.
	if got := existing(t, e.impl, c.ID(), userID); len(got) != 0 {
		t.Errorf("member written by the inner InTx survived the outer rollback")
	}
	_, err = e.impl.Crews.Get(ctx, c.ID())
	expectIs(t, err, crew.ErrNotFound, "crew after the outer rollback")
}

func testTxEndedContextIsNotCommitted(t *testing.T, e env[ports.Stores]) {
	// Long enough for BEGIN and the insert on a busy runner, so that the deadline passes while fn
	// waits for it, as the case means, and not during the insert.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := crew.New(randomID(), "never committed", 5, now())
	must(t, err, "new crew")

	err = e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
		if err := e.impl.Crews.Create(ctx, c); err != nil {
			return err
		}
		<-ctx.Done() // the caller's deadline passes before fn returns
		return nil
	})

	expectIs(t, err, context.DeadlineExceeded, "InTx")
	_, err = e.impl.Crews.Get(context.Background(), c.ID())
	expectIs(t, err, crew.ErrNotFound, "crew of the uncommitted transaction")
}

// testTxTimeoutBoundsRowLockWait: a transaction waiting for a row lock held elsewhere gives up
// when the backend's bound passes, with ports.ErrUnavailable, instead of hanging.
func testTxTimeoutBoundsRowLockWait(t *testing.T, e env[ports.Stores]) {
	if e.caps.NewStoresWithTxTimeout == nil {
		t.Skip("the backend puts no bound of its own on transactions")
	}
	const txTimeout = 300 * time.Millisecond
	holder, waiter := e.impl, e.caps.NewStoresWithTxTimeout(t, txTimeout)
	c := createCrew(t, holder, 5)

	locked, release := make(chan struct{}), make(chan struct{})
	holderDone := make(chan error, 1)
	go func() {
		holderDone <- holder.Tx.InTx(context.Background(), func(ctx context.Context) error {
			if _, err := holder.Crews.GetForUpdate(ctx, c.ID()); err != nil {
				return err
			}
			close(locked)
			<-release
			return nil
		})
	}()
	select {
	case <-locked:
	case err := <-holderDone:
		t.Fatalf("holder could not lock the crew: %v", err)
	}

	start := time.Now()
	err := waiter.Tx.InTx(context.Background(), func(ctx context.Context) error {
		_, err := waiter.Crews.GetForUpdate(ctx, c.ID())
		return err
	})
	elapsed := time.Since(start)
	close(release)

	expectIs(t, err, ports.ErrUnavailable, "waiter")
	if elapsed < txTimeout || elapsed > txTimeout+2*time.Second {
		t.Errorf("waiter gave up after %v, want just over %v", elapsed, txTimeout)
	}
	must(t, <-holderDone, "the holder's transaction is unaffected")
}

// testTxTimeoutOverrunIsUnavailable: a transaction still running when the backend's bound
// passes is rolled back, and InTx reports ports.ErrUnavailable rather than success.
func testTxTimeoutOverrunIsUnavailable(t *testing.T, e env[ports.Stores]) {
	if e.caps.NewStoresWithTxTimeout == nil {
		t.Skip("the backend puts no bound of its own on transactions")
	}
	s := e.caps.NewStoresWithTxTimeout(t, 200*time.Millisecond)
	c, err := crew.New(randomID(), "overran", 5, now())
	must(t, err, "new crew")

	err = s.Tx.InTx(context.Background(), func(ctx context.Context) error {
		if err := s.Crews.Create(ctx, c); err != nil {
			return err
		}
		<-ctx.Done() // the bound passes while fn still runs
		return nil
	})

	expectIs(t, err, ports.ErrUnavailable, "InTx")
	// Read back through the suite's stores: the short bound applies to reads too, and a busy
	// machine can take longer than 200 ms just to open a connection.
	_, err = e.impl.Crews.Get(context.Background(), c.ID())
	expectIs(t, err, crew.ErrNotFound, "crew of the overrun transaction")
}
