package crew_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/crew"
)

var now = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

func TestNew_ValidatesNameAndCapacity(t *testing.T) {
	cases := map[string]struct {
		name  string
		max   int
		field string
	}{
		"empty name":     {"", 10, "name"},
		"long name":      {strings.Repeat("a", crew.MaxNameLength+1), 10, "name"},
		"zero capacity":  {"a", 0, "maxMembers"},
		"huge capacity":  {"a", crew.MaxMaxMembers + 1, "maxMembers"},
		"negative seats": {"a", -5, "maxMembers"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := crew.New("id", tc.name, tc.max, now)
			de, ok := domain.AsError(err)
			if !ok || !errors.Is(err, domain.ErrValidation) || de.Details["field"] != tc.field {
				t.Fatalf("err %v", err)
			}
		})
	}
	if _, err := crew.New("id", strings.Repeat("é", crew.MaxNameLength), crew.MaxMaxMembers, now); err != nil {
		t.Fatalf("limits themselves are valid: %v", err)
	}
}

func TestJoin_FillsToCapacityThenRejects(t *testing.T) {
	c, _ := crew.New("c1", "runners", 2, now)
	for _, user := range []string{"u1", "u2"} {
		m, err := c.Join(user, now)
		if err != nil || m.UserID != user || m.CrewID != "c1" || !m.JoinedAt.Equal(now) {
			t.Fatalf("%s: %+v, %v", user, m, err)
		}
	}
	if _, err := c.Join("u3", now); !errors.Is(err, crew.ErrFull) || c.CurrentMembers() != 2 {
		t.Fatalf("err %v, members %d", err, c.CurrentMembers())
	}
	c.Leave()
	if _, err := c.Join("u3", now); err != nil {
		t.Fatalf("freed seat: %v", err)
	}
}

func TestJoinAll_SeatsInOrderWhileSeatsLast(t *testing.T) {
	c := crew.Rebuild("c1", "runners", 4, 1, now)
	joined, verdicts := c.JoinAll([]string{"u1", "u2", "u2", "u3", "u4", "u5"}, map[string]bool{"u1": true}, now)
	want := []error{crew.ErrAlreadyMember, nil, crew.ErrAlreadyMember, nil, nil, crew.ErrFull}
	for i, err := range verdicts {
		if !errors.Is(err, want[i]) { // errors.Is(err, nil) holds only for a nil err
			t.Fatalf("verdicts %v, want %v", verdicts, want)
		}
	}
	var users []string
	for _, m := range joined {
		if m.CrewID != "c1" || !m.JoinedAt.Equal(now) {
			t.Fatalf("member %+v", m)
		}
		users = append(users, m.UserID)
	}
	if strings.Join(users, ",") != "u2,u3,u4" || c.CurrentMembers() != 4 || c.Remaining() != 0 {
		t.Fatalf("joined %v, members %d, remaining %d", users, c.CurrentMembers(), c.Remaining())
	}
}

func TestLeave_NeverGoesNegative(t *testing.T) {
	c := crew.Rebuild("c1", "runners", 2, 0, now)
	c.Leave()
	if c.CurrentMembers() != 0 {
		t.Fatalf("members %d", c.CurrentMembers())
	}
}

func TestError_MatchesByCode(t *testing.T) {
	detailed := *crew.ErrFull
	detailed.Details = map[string]any{"crewId": "c1"}
	if !errors.Is(&detailed, crew.ErrFull) || errors.Is(&detailed, crew.ErrNotFound) {
		t.Fatal("errors.Is must match on the code alone")
	}
}
