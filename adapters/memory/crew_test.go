package memory_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
)

// An Add that includes a pair a concurrent transaction has added but not committed waits for
// it, then fails inserting none if it committed and inserts all if it rolled back, as on
// Postgres and InnoDB.
func TestAdd_ConcurrentDuplicateWaitsForTheFirst(t *testing.T) {
	cases := map[string]struct {
		firstEnds   error // nil commits
		wantSecond  error
		wantMembers []string
	}{
		"first commits":    {nil, crew.ErrAlreadyMember, []string{"u1"}},
		"first rolls back": {errRollback, nil, []string{"u1", "u2"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStore()
			crewID := s.createCrew(t, 10)
			member := func(userID string) crew.Member { return crew.Member{CrewID: crewID, UserID: userID, JoinedAt: epoch} }

			end := openTx(t, s.db, func(ctx context.Context) error { return s.CrewMembers.Add(ctx, member("u1")) })
			second := make(chan error, 1)
			go func() {
				second <- s.db.InTx(context.Background(), func(ctx context.Context) error {
					return s.CrewMembers.Add(ctx, member("u2"), member("u1"))
				})
			}()
			waitUntilBlocked(t, s.db, 1)
			if err := end(tc.firstEnds); !errors.Is(err, tc.firstEnds) {
				t.Fatalf("ending the first transaction: %v", err)
			}
			if err := <-second; !errors.Is(err, tc.wantSecond) {
				t.Fatalf("second Add = %v, want %v", err, tc.wantSecond)
			}
			assertMembers(t, s, crewID, tc.wantMembers)
		})
	}
}

func TestAdd_InsertsAllOrNone(t *testing.T) {
	cases := map[string]struct {
		add         func(crewID string) []crew.Member
		wantErr     error
		wantMembers []string
	}{
		"new members": {
			add:         func(crewID string) []crew.Member { return newMembers(crewID, "u2", "u3") },
			wantMembers: []string{"u1", "u2", "u3"},
		},
		"one already a member": {
			add:         func(crewID string) []crew.Member { return newMembers(crewID, "u2", "u1", "u3") },
			wantErr:     crew.ErrAlreadyMember,
			wantMembers: []string{"u1"},
		},
		"the same user twice": {
			add:         func(crewID string) []crew.Member { return newMembers(crewID, "u2", "u2") },
			wantErr:     crew.ErrAlreadyMember,
			wantMembers: []string{"u1"},
		},
		"one of an unknown crew": {
			add: func(crewID string) []crew.Member {
				return append(newMembers(crewID, "u2"), newMembers("missing", "u3")...)
			},
			wantErr:     crew.ErrNotFound,
			wantMembers: []string{"u1"},
		},
		"none": {
			add:         func(string) []crew.Member { return nil },
			wantMembers: []string{"u1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStore()
			ctx := context.Background()
			crewID := s.createCrew(t, 10)
			if err := s.CrewMembers.Add(ctx, newMembers(crewID, "u1")...); err != nil {
				t.Fatalf("Add: %v", err)
			}
			if err := s.CrewMembers.Add(ctx, tc.add(crewID)...); !errors.Is(err, tc.wantErr) {
				t.Fatalf("Add = %v, want %v", err, tc.wantErr)
			}
			assertMembers(t, s, crewID, tc.wantMembers)
		})
	}
}

// newMembers returns members userIDs of crewID.
func newMembers(crewID string, userIDs ...string) []crew.Member {
	ms := make([]crew.Member, len(userIDs))
	for i, userID := range userIDs {
		ms[i] = crew.Member{CrewID: crewID, UserID: userID, JoinedAt: epoch}
	}
	return ms
}

// assertMembers checks that the committed members of crewID are exactly want.
func assertMembers(t *testing.T, s store, crewID string, want []string) {
	t.Helper()
	page, err := s.CrewMembers.List(context.Background(), crewID, nil, 100)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	got := make([]string, len(page))
	for i, m := range page {
		got[i] = m.UserID
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("members = %v, want %v", got, want)
	}
}

func TestExisting_ReportsTheMembersAmongUsersAsTheTransactionSeesThem(t *testing.T) {
	t.Parallel()
	s := newStore()
	ctx := context.Background()
	crewID, otherID := s.createCrew(t, 10), s.createCrew(t, 10)
	if err := s.CrewMembers.Add(ctx, append(newMembers(crewID, "u1", "u2"), newMembers(otherID, "u3")...)...); err != nil {
		t.Fatalf("Add: %v", err)
	}
	users := []string{"u1", "u2", "u3", "u4", "u5"}

	existing := func(ctx context.Context) map[string]bool {
		t.Helper()
		got, err := s.CrewMembers.Existing(ctx, crewID, users)
		if err != nil {
			t.Errorf("Existing: %v", err)
		}
		return got
	}
	// Another transaction's uncommitted writes are invisible; its own are visible.
	end := openTx(t, s.db, func(ctx context.Context) error {
		if err := s.CrewMembers.Remove(ctx, crewID, "u2"); err != nil {
			return err
		}
		if err := s.CrewMembers.Add(ctx, newMembers(crewID, "u4")...); err != nil {
			return err
		}
		if got, want := existing(ctx), map[string]bool{"u1": true, "u4": true}; !maps.Equal(got, want) {
			t.Errorf("inside: Existing = %v, want %v", got, want)
		}
		return nil
	})
	if got, want := existing(ctx), map[string]bool{"u1": true, "u2": true}; !maps.Equal(got, want) {
		t.Errorf("outside before commit: Existing = %v, want %v", got, want)
	}
	if err := end(nil); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if got, want := existing(ctx), map[string]bool{"u1": true, "u4": true}; !maps.Equal(got, want) {
		t.Errorf("after commit: Existing = %v, want %v", got, want)
	}
	if got, err := s.CrewMembers.Existing(ctx, crewID, nil); err != nil || got == nil || len(got) != 0 {
		t.Errorf("Existing of no users = %v, %v, want an empty set", got, err)
	}
}

func TestRemove_DeletesOrReportsNotMember(t *testing.T) {
	t.Parallel()
	s := newStore()
	ctx := context.Background()
	crewID := s.createCrew(t, 10)
	if err := s.CrewMembers.Remove(ctx, crewID, "u1"); !errors.Is(err, crew.ErrNotMember) {
		t.Errorf("Remove of a stranger = %v, want crew.ErrNotMember", err)
	}
	if err := s.CrewMembers.Add(ctx, crew.Member{CrewID: crewID, UserID: "u1", JoinedAt: epoch}); err != nil {
		t.Fatalf("Add: %v", err)
	}

	// A removal is invisible to others until it commits.
	end := openTx(t, s.db, func(ctx context.Context) error { return s.CrewMembers.Remove(ctx, crewID, "u1") })
	if !s.isMember(t, crewID, "u1") {
		t.Error("uncommitted Remove is visible outside")
	}
	if err := end(nil); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if s.isMember(t, crewID, "u1") {
		t.Error("member still exists after Remove committed")
	}
	if err := s.CrewMembers.Remove(ctx, crewID, "u1"); !errors.Is(err, crew.ErrNotMember) {
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
		if err := s.CrewMembers.Add(ctx, m); err != nil {
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
			page, err := s.CrewMembers.List(ctx, crewID, tt.after, tt.limit)
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
	if err := s.CrewMembers.Add(ctx, crew.Member{CrewID: crewID, UserID: "u1", JoinedAt: epoch}); err != nil {
		t.Fatalf("Add: %v", err)
	}

	err := s.db.InTx(ctx, func(ctx context.Context) error {
		if err := s.CrewMembers.Remove(ctx, crewID, "u1"); err != nil {
			return err
		}
		if err := s.CrewMembers.Add(ctx, crew.Member{CrewID: crewID, UserID: "u2", JoinedAt: epoch}); err != nil {
			return err
		}
		if n, _ := s.CrewMembers.Count(ctx, crewID); n != 1 {
			t.Errorf("count inside = %d, want 1", n)
		}
		page, _ := s.CrewMembers.List(ctx, crewID, nil, 10)
		if len(page) != 1 || page[0].UserID != "u2" {
			t.Errorf("list inside = %v, want only u2", page)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("InTx = %v", err)
	}
	page, _ := s.CrewMembers.List(ctx, crewID, nil, 10)
	if len(page) != 1 || page[0].UserID != "u1" {
		t.Errorf("list after rollback = %v, want only u1", page)
	}
}
