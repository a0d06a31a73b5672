package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/test/testkit"
)

var errRollback = errors.New("roll back")

func TestInTx_UncommittedWritesAreInvisibleOutside(t *testing.T) {
	t.Parallel()
	s := newStore()
	ctx := context.Background()
	crewID := s.createCrew(t, 10)

	end := openTx(t, s.db, func(ctx context.Context) error {
		c, err := s.Crews.GetForUpdate(ctx, crewID)
		if err != nil {
			return err
		}
		m, err := c.Join("u1", epoch)
		if err != nil {
			return err
		}
		if err := s.CrewMembers.Add(ctx, m); err != nil {
			return err
		}
		if err := s.Crews.Save(ctx, c); err != nil {
			return err
		}
		// The transaction reads its own writes.
		if got, _ := s.Crews.Get(ctx, crewID); got.CurrentMembers() != 1 {
			t.Errorf("inside: currentMembers = %d, want 1", got.CurrentMembers())
		}
		if n, _ := s.CrewMembers.Count(ctx, crewID); n != 1 {
			t.Errorf("inside: count = %d, want 1", n)
		}
		return nil
	})

	got, err := s.Crews.Get(ctx, crewID)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.CurrentMembers() != 0 {
		t.Errorf("outside before commit: currentMembers = %d, want 0", got.CurrentMembers())
	}
	if s.isMember(t, crewID, "u1") {
		t.Error("outside before commit: member exists")
	}

	if err := end(nil); err != nil {
		t.Fatalf("commit: %v", err)
	}
	got, _ = s.Crews.Get(ctx, crewID)
	if got.CurrentMembers() != 1 {
		t.Errorf("after commit: currentMembers = %d, want 1", got.CurrentMembers())
	}
	if n, _ := s.CrewMembers.Count(ctx, crewID); n != 1 {
		t.Errorf("after commit: count = %d, want 1", n)
	}
}

func TestInTx_ErrorRollsBackAndIsReturnedUnchanged(t *testing.T) {
	t.Parallel()
	s := newStore()
	ctx := context.Background()
	crewID := s.createCrew(t, 10)

	err := s.db.InTx(ctx, func(ctx context.Context) error {
		c, err := s.Crews.GetForUpdate(ctx, crewID)
		if err != nil {
			return err
		}
		m, _ := c.Join("u1", epoch)
		if err := s.CrewMembers.Add(ctx, m); err != nil {
			return err
		}
		if err := s.Crews.Save(ctx, c); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("InTx = %v, want errRollback itself", err)
	}
	assertEmptyCrew(t, s, crewID)
}

func TestInTx_PanicRollsBackAndReleasesLocks(t *testing.T) {
	t.Parallel()
	s := newStore()
	ctx := context.Background()
	crewID := s.createCrew(t, 10)

	func() {
		defer func() {
			if recover() != "boom" {
				t.Error("the panic was not re-raised")
			}
		}()
		_ = s.db.InTx(ctx, func(ctx context.Context) error {
			c, _ := s.Crews.GetForUpdate(ctx, crewID)
			m, _ := c.Join("u1", epoch)
			_ = s.CrewMembers.Add(ctx, m)
			_ = s.Crews.Save(ctx, c)
			panic("boom")
		})
	}()
	assertEmptyCrew(t, s, crewID)

	// The row lock went with the transaction.
	lockCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := s.db.InTx(lockCtx, func(ctx context.Context) error {
		_, err := s.Crews.GetForUpdate(ctx, crewID)
		return err
	})
	if err != nil {
		t.Fatalf("GetForUpdate after the panic: %v", err)
	}
}

func assertEmptyCrew(t *testing.T, s store, crewID string) {
	t.Helper()
	ctx := context.Background()
	c, err := s.Crews.Get(ctx, crewID)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if c.CurrentMembers() != 0 {
		t.Errorf("currentMembers = %d, want 0 after rollback", c.CurrentMembers())
	}
	if s.isMember(t, crewID, "u1") {
		t.Error("member exists after rollback")
	}
}

func TestInTx_NestedCallJoinsTheOuterTransaction(t *testing.T) {
	t.Parallel()
	s := newStore()
	ctx := context.Background()
	crewID := s.createCrew(t, 10)

	err := s.db.InTx(ctx, func(ctx context.Context) error {
		if err := s.db.InTx(ctx, func(ctx context.Context) error {
			return s.CrewMembers.Add(ctx, crew.Member{CrewID: crewID, UserID: "u1", JoinedAt: epoch})
		}); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("InTx = %v, want errRollback", err)
	}
	if s.isMember(t, crewID, "u1") {
		t.Error("the inner call committed on its own")
	}
}

func TestInTx_CancelledContextFailsTheCommit(t *testing.T) {
	t.Parallel()
	s := newStore()
	crewID := s.createCrew(t, 10)
	ctx, cancel := context.WithCancel(context.Background())

	err := s.db.InTx(ctx, func(ctx context.Context) error {
		if err := s.CrewMembers.Add(ctx, crew.Member{CrewID: crewID, UserID: "u1", JoinedAt: epoch}); err != nil {
			return err
		}
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("InTx = %v, want context.Canceled", err)
	}
	if s.isMember(t, crewID, "u1") {
		t.Error("a failed commit kept its writes")
	}
}

func TestGetForUpdate_FailsOutsideATransaction(t *testing.T) {
	t.Parallel()
	s := newStore()
	crewID := s.createCrew(t, 10)
	if _, err := s.Crews.GetForUpdate(context.Background(), crewID); err == nil {
		t.Fatal("GetForUpdate outside InTx succeeded")
	}
}

// readCrew is how a join reads the crew it is about to update.
type readCrew func(ctx context.Context, s store, crewID string) (*crew.Crew, error)

// Transactions interleave between statements (Database yields at each one), so a join that
// reads the crew without holding its row lock to the end over-fills it or loses counts. The
// broken readers must fail the invariant: that proves the schedule really interleaves, so
// GetForUpdate keeping it means its lock, not a lucky schedule, did.
func TestConcurrentJoins_OnlyALockHeldToTheEndKeepsTheCrewConsistent(t *testing.T) {
	const capacity, joiners = 30, 50
	cases := map[string]struct {
		read           readCrew
		wantConsistent bool
	}{
		"GetForUpdate": {
			read: func(ctx context.Context, s store, crewID string) (*crew.Crew, error) {
				return s.Crews.GetForUpdate(ctx, crewID)
			},
			wantConsistent: true,
		},
		"Get, without a lock": {
			read: func(ctx context.Context, s store, crewID string) (*crew.Crew, error) {
				return s.Crews.Get(ctx, crewID)
			},
		},
		"GetForUpdate releasing its lock right after the read": {
			read: func(ctx context.Context, s store, crewID string) (*crew.Crew, error) {
				c, err := s.Crews.GetForUpdate(ctx, crewID)
				memory.ReleaseRowLocks(ctx, s.db)
				return c, err
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStore()
			crewID := s.createCrew(t, capacity)

			errs := make([]error, joiners)
			testkit.StartTogether(joiners, func(i int) {
				errs[i] = s.db.InTx(context.Background(), func(ctx context.Context) error {
					c, err := tc.read(ctx, s, crewID)
					if err != nil {
						return err
					}
					m, err := c.Join(uuid.NewString(), epoch)
					if err != nil {
						return err
					}
					if err := s.CrewMembers.Add(ctx, m); err != nil {
						return err
					}
					return s.Crews.Save(ctx, c)
				})
			})
			joined := 0
			for _, err := range errs {
				switch {
				case err == nil:
					joined++
				case !errors.Is(err, crew.ErrFull):
					t.Errorf("join: %v", err)
				}
			}

			c, err := s.Crews.Get(context.Background(), crewID)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			n, err := s.CrewMembers.Count(context.Background(), crewID)
			if err != nil {
				t.Fatalf("Count: %v", err)
			}
			consistent := joined == capacity && n == capacity && c.CurrentMembers() == capacity
			if consistent != tc.wantConsistent {
				t.Errorf("joined %d, members %d, currentMembers %d of %d seats: consistent = %v, want %v",
					joined, n, c.CurrentMembers(), capacity, consistent, tc.wantConsistent)
			}
		})
	}
}

func TestGetForUpdate_WaiterSeesTheHolderCommittedWrite(t *testing.T) {
	t.Parallel()
	s := newStore()
	crewID := s.createCrew(t, 10)

	end := openTx(t, s.db, func(ctx context.Context) error {
		c, err := s.Crews.GetForUpdate(ctx, crewID)
		if err != nil {
			return err
		}
		_, _ = c.Join("u1", epoch)
		return s.Crews.Save(ctx, c)
	})
	seen := make(chan int, 1)
	go func() {
		_ = s.db.InTx(context.Background(), func(ctx context.Context) error {
			c, err := s.Crews.GetForUpdate(ctx, crewID)
			if err != nil {
				return err
			}
			seen <- c.CurrentMembers()
			return nil
		})
	}()
	waitUntilBlocked(t, s.db, 1)
	if err := end(nil); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if got := <-seen; got != 1 {
		t.Errorf("waiter saw currentMembers = %d, want the committed 1", got)
	}
}

func TestGetForUpdate_ReturnsContextErrorWhileWaiting(t *testing.T) {
	t.Parallel()
	s := newStore()
	crewID := s.createCrew(t, 10)
	end := openTx(t, s.db, func(ctx context.Context) error {
		_, err := s.Crews.GetForUpdate(ctx, crewID)
		return err
	})
	defer func() { _ = end(nil) }()

	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() {
		result <- s.db.InTx(ctx, func(ctx context.Context) error {
			_, err := s.Crews.GetForUpdate(ctx, crewID)
			return err
		})
	}()
	waitUntilBlocked(t, s.db, 1)
	cancel()
	if err := <-result; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter = %v, want context.Canceled", err)
	}
}

func TestRowLocks_DeadlockFailsTheTransactionClosingTheCycle(t *testing.T) {
	t.Parallel()
	s := newStore()
	first, second := s.createCrew(t, 10), s.createCrew(t, 10)

	// A locks first; B locks second and waits for first; A then asks for second.
	aHoldsFirst, bIsWaiting := make(chan struct{}), make(chan struct{})
	aResult, bResult := make(chan error, 1), make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		aResult <- s.db.InTx(ctx, func(ctx context.Context) error {
			if _, err := s.Crews.GetForUpdate(ctx, first); err != nil {
				return err
			}
			close(aHoldsFirst)
			<-bIsWaiting
			_, err := s.Crews.GetForUpdate(ctx, second)
			return err
		})
	}()
	<-aHoldsFirst
	go func() {
		bResult <- s.db.InTx(ctx, func(ctx context.Context) error {
			if _, err := s.Crews.GetForUpdate(ctx, second); err != nil {
				return err
			}
			_, err := s.Crews.GetForUpdate(ctx, first)
			return err
		})
	}()
	waitUntilBlocked(t, s.db, 1)
	close(bIsWaiting)

	if err := <-aResult; err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("A = %v, want a deadlock error", err)
	}
	if err := <-bResult; err != nil {
		t.Fatalf("B = %v, want it to proceed once A rolled back", err)
	}
}

func TestCrewRepository_ReturnsCopies(t *testing.T) {
	t.Parallel()
	s := newStore()
	ctx := context.Background()
	crewID := s.createCrew(t, 10)

	c, _ := s.Crews.Get(ctx, crewID)
	_, _ = c.Join("u1", epoch)
	got, _ := s.Crews.Get(ctx, crewID)
	if got.CurrentMembers() != 0 {
		t.Errorf("mutating a returned crew changed the store: currentMembers = %d", got.CurrentMembers())
	}
	if err := s.Crews.Save(ctx, c); err != nil {
		t.Fatalf("Save: %v", err)
	}
	got, _ = s.Crews.Get(ctx, crewID)
	if got.CurrentMembers() != 1 {
		t.Errorf("after Save: currentMembers = %d, want 1", got.CurrentMembers())
	}
}

func TestCrewRepository_UnknownCrewIsNotFound(t *testing.T) {
	t.Parallel()
	s := newStore()
	ctx := context.Background()
	if _, err := s.Crews.Get(ctx, "missing"); !errors.Is(err, crew.ErrNotFound) {
		t.Errorf("Get = %v, want crew.ErrNotFound", err)
	}
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		_, err := s.Crews.GetForUpdate(ctx, "missing")
		return err
	})
	if !errors.Is(err, crew.ErrNotFound) {
		t.Errorf("GetForUpdate = %v, want crew.ErrNotFound", err)
	}
}

func TestCrewRepository_CreateRejectsADuplicateID(t *testing.T) {
	t.Parallel()
	s := newStore()
	ctx := context.Background()
	crewID := s.createCrew(t, 10)
	dup, _ := crew.New(crewID, "again", 5, epoch)
	if err := s.Crews.Create(ctx, dup); err == nil {
		t.Fatal("Create of an existing id succeeded")
	}
	if got, _ := s.Crews.Get(ctx, crewID); got.Name() != "crew" {
		t.Errorf("name = %q, the duplicate overwrote the crew", got.Name())
	}
}
