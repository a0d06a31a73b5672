package memory_test

import (
	"context"
	"errors"
	"testing"

	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
)

// Every repository of a store set takes part in the set's transactions, on the one database.
func TestNewStores_RepositoriesShareTheTransactionsOfTheDatabase(t *testing.T) {
	cases := map[string]struct {
		end        error // nil commits
		wantStored bool
	}{
		"commit":   {nil, true},
		"rollback": {errRollback, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStore()
			ctx := context.Background()
			c, err := crew.New("c1", "crew", 10, epoch)
			if err != nil {
				t.Fatalf("crew.New: %v", err)
			}
			marker := newMarker("u1", "k1", 0)

			err = s.Tx.InTx(ctx, func(ctx context.Context) error {
				if err := s.Crews.Create(ctx, c); err != nil {
					return err
				}
				if err := s.CrewMembers.Add(ctx, newMembers(c.ID(), "u1")...); err != nil {
					return err
				}
				if err := s.Markers.Save(ctx, []ports.IdempotencyMarker{marker}); err != nil {
					return err
				}
				return tc.end
			})
			if !errors.Is(err, tc.end) {
				t.Fatalf("InTx = %v, want %v", err, tc.end)
			}

			_, getErr := s.Crews.Get(ctx, c.ID())
			got := [3]bool{getErr == nil, s.isMember(t, c.ID(), "u1"), storedIn(ctx, t, s, marker.Key)}
			if want := [3]bool{tc.wantStored, tc.wantStored, tc.wantStored}; got != want {
				t.Errorf("crew, member, marker stored = %v, want %v", got, want)
			}
		})
	}
}
