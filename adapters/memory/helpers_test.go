package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

func newFakeClock() *memory.Clock {
	return memory.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
}

// store is a Database with the store set NewStores builds on it.
type store struct {
	db *memory.Database
	ports.Stores
}

func newStore() store {
	db := memory.NewDatabase()
	return store{db: db, Stores: memory.NewStores(db)}
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// createCrew stores a new empty crew with room for maxMembers and returns its id.
func (s store) createCrew(t *testing.T, maxMembers int) string {
	t.Helper()
	c, err := crew.New(uuid.NewString(), "crew", maxMembers, epoch)
	if err != nil {
		t.Fatalf("crew.New: %v", err)
	}
	if err := s.Crews.Create(context.Background(), c); err != nil {
		t.Fatalf("Create: %v", err)
	}
	return c.ID()
}

// isMember reports whether userID is a committed member of crewID.
func (s store) isMember(t *testing.T, crewID, userID string) bool {
	t.Helper()
	existing, err := s.CrewMembers.Existing(context.Background(), crewID, []string{userID})
	if err != nil {
		t.Fatalf("Existing: %v", err)
	}
	return existing[userID]
}

// waitUntilBlocked waits until n transactions of db are queued on a row lock.
func waitUntilBlocked(t *testing.T, db *memory.Database, n int) {
	t.Helper()
	testkit.Eventually(t, 5*time.Second, fmt.Sprintf("%d transactions waiting on a lock", n), func() error {
		if waiting := memory.WaitingTransactions(db); waiting < n {
			return fmt.Errorf("%d waiting", waiting)
		}
		return nil
	})
}

// openTx starts a transaction that stays open until the returned function is called with the
// error fn should return (nil commits); that function returns InTx's result. body runs first,
// inside the transaction.
func openTx(t *testing.T, db *memory.Database, body func(ctx context.Context) error) (end func(error) error) {
	t.Helper()
	ready := make(chan error, 1)
	finish := make(chan error)
	result := make(chan error, 1)
	go func() {
		result <- db.InTx(context.Background(), func(ctx context.Context) error {
			if err := body(ctx); err != nil {
				ready <- err
				return err
			}
			ready <- nil
			return <-finish
		})
	}()
	if err := <-ready; err != nil {
		t.Fatalf("transaction body: %v", err)
	}
	return func(err error) error {
		finish <- err
		return <-result
	}
}
