package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
)

// A second Add of the same pair waits for the first transaction, then fails if it committed
// and succeeds if it rolled back, as on Postgres and InnoDB.
func TestAdd_ConcurrentDuplicateWaitsForTheFirst(t *testing.T) {
	cases := map[string]struct {
		firstEnds  error // nil commits
		wantSecond error
	}{
		"first commits":    {nil, crew.ErrAlreadyMember},
		"first rolls back": {errRollback, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStore()
			crewID := s.createCrew(t, 10)
			m := crew.Member{CrewID: crewID, UserID: "u1", JoinedAt: epoch}

			end := openTx(t, s.db, func(ctx context.Context) error { return s.members.Add(ctx, m) })
			second := make(chan error, 1)
			go func() {
				second <- s.db.InTx(context.Background(), func(ctx context.Context) error {
					return s.members.Add(ctx, m)
				})
			}()
			waitUntilBlocked(t, s.db, 1)
			if err := end(tc.firstEnds); err != tc.firstEnds {
				t.Fatalf("ending the first transaction: %v", err)
			}
			if err := <-second; !errors.Is(err, tc.wantSecond) {
				t.Fatalf("second Add = %v, want %v", err, tc.wantSecond)
			}
			if n, _ := s.members.Count(context.Background(), crewID); n != 1 {
				t.Errorf("count = %d, want 1", n)
			}
		})
	}
}

func TestAdd_RejectsAnExistingMemberAndAnUnknownCrew(t *testing.T) {
	t.Parallel()
	s := newStore()
	ctx := context.Background()
	crewID := s.createCrew(t, 10)
	m := crew.Member{CrewID: crewID, UserID: "u1", JoinedAt: epoch}
	if err := s.members.Add(ctx, m); err != nil {
		t.Fatalf("Add: %v", err)
	}
	if err := s.members.Add(ctx, m); !errors.Is(err, crew.ErrAlreadyMember) {
		t.Errorf("second Add = %v, want crew.ErrAlreadyMember", err)
	}
	err := s.members.Add(ctx, crew.Member{CrewID: "missing", UserID: "u1", JoinedAt: epoch})
	if !errors.Is(err, crew.ErrNotFound) {
		t.Errorf("Add to an unknown crew = %v, want a foreign-key error wrapping crew.ErrNotFound", err)
	}
}

func TestRemove_DeletesOrReportsNotMember(t *testing.T) {
	t.Parallel()
	s := newStore()
	ctx := context.Background()
	crewID := s.createCrew(t, 10)
	if err := s.members.Remove(ctx, crewID, "u1"); !errors.Is(err, crew.ErrNotMember) {
		t.Errorf("Remove of a stranger = %v, want crew.ErrNotMember", err)
	}
	if err := s.members.Add(ctx, crew.Member{CrewID: crewID, UserID: "u1", JoinedAt: epoch}); err != nil {
		t.Fatalf("Add: %v", err)
	}

	// A removal is invisible to others until it commits.
	end := openTx(t, s.db, func(ctx context.Context) error { return s.members.Remove(ctx, crewID, "u1") })
	if exists, _ := s.members.Exists(ctx, crewID, "u1"); !exists {
		t.Error("uncommitted Remove is visible outside")
	}
	if err := end(nil); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if exists, _ := s.members.Exists(ctx, crewID, "u1"); exists {
		t.Error("member still exists after Remove committed")
	}
	if err := s.members.Remove(ctx, crewID, "u1"); !errors.Is(err, crew.ErrNotMember) {
		t.Errorf("second Remove = %v, want crew.ErrNotMember", err)
	}
}

func TestList_PagesInJoinOrderAfterTheCursor(t *testing.T) {
	t.Parallel()
	s := newStore()
	ctx := context.Background()
	crewID := s.createCrew(t, 10)
	otherID := s.createCrew(t, 10)
	// Inserted out of order; u2 and u3 joined at the same instant and are ordered by user id.
	joined := []crew.Member{
		{CrewID: crewID, UserID: "u3", JoinedAt: epoch.Add(time.Second)},
		{CrewID: crewID, UserID: "u4", JoinedAt: epoch.Add(2 * time.Second)},
		{CrewID: crewID, UserID: "u1", JoinedAt: epoch},
		{CrewID: crewID, UserID: "u2", JoinedAt: epoch.Add(time.Second)},
		{CrewID: otherID, UserID: "u0", JoinedAt: epoch},
	}
	for _, m := range joined {
		if err := s.members.Add(ctx, m); err != nil {
			t.Fatalf("Add: %v", err)
		}
	}

	tests := []struct {
		name  string
		after *ports.MemberCursor
		limit int
		want  []string
	}{
		{"first page", nil, 2, []string{"u1", "u2"}},
		{"after a tie", &ports.MemberCursor{JoinedAt: epoch.Add(time.Second), UserID: "u2"}, 2, []string{"u3", "u4"}},
		{"after a position that is not a member", &ports.MemberCursor{JoinedAt: epoch, UserID: "u9"}, 10, []string{"u2", "u3", "u4"}},
		{"past the end", &ports.MemberCursor{JoinedAt: epoch.Add(2 * time.Second), UserID: "u4"}, 10, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := s.members.List(ctx, crewID, tt.after, tt.limit)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			var got []string
			for _, m := range page {
				got = append(got, m.UserID)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestCountAndList_SeeTheOwnTransactionsWrites(t *testing.T) {
	t.Parallel()
	s := newStore()
	ctx := context.Background()
	crewID := s.createCrew(t, 10)
	if err := s.members.Add(ctx, crew.Member{CrewID: crewID, UserID: "u1", JoinedAt: epoch}); err != nil {
		t.Fatalf("Add: %v", err)
	}

	err := s.db.InTx(ctx, func(ctx context.Context) error {
		if err := s.members.Remove(ctx, crewID, "u1"); err != nil {
			return err
		}
		if err := s.members.Add(ctx, crew.Member{CrewID: crewID, UserID: "u2", JoinedAt: epoch}); err != nil {
			return err
		}
		if n, _ := s.members.Count(ctx, crewID); n != 1 {
			t.Errorf("count inside = %d, want 1", n)
		}
		page, _ := s.members.List(ctx, crewID, nil, 10)
		if len(page) != 1 || page[0].UserID != "u2" {
			t.Errorf("list inside = %v, want only u2", page)
		}
		return errRollback
	})
	if err != errRollback {
		t.Fatalf("InTx = %v", err)
	}
	page, _ := s.members.List(ctx, crewID, nil, 10)
	if len(page) != 1 || page[0].UserID != "u1" {
		t.Errorf("list after rollback = %v, want only u1", page)
	}
}
