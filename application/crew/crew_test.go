package crew_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/system"
	appcrew "github.com/rushgate/rushgate/application/crew"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/crew"
)

type fixture struct {
	svc     *appcrew.Service
	members *memory.CrewMemberRepository
}

func newService(t *testing.T) fixture {
	t.Helper()
	clock := system.Clock{}
	db := memory.NewDatabase()
	members := memory.NewCrewMemberRepository(db)
	// Short backoff keeps the stampede test fast; the schedule itself is the guard's test.
	g := guard.New(memory.NewIdempotencyStore(clock), memory.NewLocker(clock), system.Sleeper{},
		guard.Config{BaseDelay: time.Millisecond, MaxRetries: 10})
	svc := appcrew.NewService(db, memory.NewCrewRepository(db), members, g, clock, system.UUIDs{})
	return fixture{svc: svc, members: members}
}

func mustCreate(t *testing.T, svc *appcrew.Service, max int) appcrew.View {
	t.Helper()
	v, err := svc.Create(context.Background(), appcrew.CreateCommand{Name: "runners", MaxMembers: max})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func join(svc *appcrew.Service, crewID, userID string) (guard.Result[appcrew.JoinResult], error) {
	return svc.Join(context.Background(), appcrew.JoinCommand{CrewID: crewID, UserID: userID, IdempotencyKey: "join-" + userID})
}

func TestCreate_ValidatesInput(t *testing.T) {
	f := newService(t)
	cases := []appcrew.CreateCommand{{Name: "", MaxMembers: 10}, {Name: "a", MaxMembers: 0}, {Name: "a", MaxMembers: 100001}}
	for _, cmd := range cases {
		if _, err := f.svc.Create(context.Background(), cmd); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("%+v: err %v", cmd, err)
		}
	}
}

func TestJoin_SeatsTheUserAndCounts(t *testing.T) {
	f := newService(t)
	c := mustCreate(t, f.svc, 2)
	res, err := join(f.svc, c.ID, "u1")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 201 || res.Value.CurrentMembers != 1 || res.Value.MaxMembers != 2 || res.Value.UserID != "u1" {
		t.Fatalf("%+v", res)
	}
	got, _ := f.svc.Get(context.Background(), c.ID)
	if got.CurrentMembers != 1 {
		t.Fatalf("currentMembers %d", got.CurrentMembers)
	}
}

func TestJoin_RejectsWhenFull(t *testing.T) {
	f := newService(t)
	c := mustCreate(t, f.svc, 1)
	if _, err := join(f.svc, c.ID, "u1"); err != nil {
		t.Fatal(err)
	}
	if _, err := join(f.svc, c.ID, "u2"); !errors.Is(err, crew.ErrFull) {
		t.Fatalf("err %v", err)
	}
}

func TestJoin_RejectsAnExistingMemberWithoutReplay(t *testing.T) {
	f := newService(t)
	c := mustCreate(t, f.svc, 1)
	if _, err := join(f.svc, c.ID, "u1"); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.Join(context.Background(), appcrew.JoinCommand{CrewID: c.ID, UserID: "u1", IdempotencyKey: "another-key"})
	if !errors.Is(err, crew.ErrAlreadyMember) {
		t.Fatalf("err %v", err)
	}
}

func TestJoin_ReplaysTheSameKey(t *testing.T) {
	f := newService(t)
	c := mustCreate(t, f.svc, 5)
	first, _ := join(f.svc, c.ID, "u1")
	again, err := join(f.svc, c.ID, "u1")
	if err != nil || !again.Replayed || again.Value != first.Value {
		t.Fatalf("%+v, %v", again, err)
	}
}

func TestJoin_UnknownCrewAndBadInput(t *testing.T) {
	f := newService(t)
	if _, err := join(f.svc, "0190a0b0-0000-7000-8000-000000000000", "u1"); !errors.Is(err, crew.ErrNotFound) {
		t.Fatalf("unknown crew: %v", err)
	}
	for _, id := range []string{"", "not-a-uuid", "0190A0B0-0000-7000-8000-000000000000"} {
		if _, err := join(f.svc, id, "u1"); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("crew id %q: %v", id, err)
		}
	}
}

func TestJoin_StampedeNeverOverfills(t *testing.T) {
	f := newService(t)
	c := mustCreate(t, f.svc, 20)
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := join(f.svc, c.ID, fmt.Sprintf("u%d", i))
			code := "OK"
			if de, ok := domain.AsError(err); ok {
				code = de.Code
			} else if err != nil {
				code = err.Error()
			}
			mu.Lock()
			outcomes[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	got, _ := f.svc.Get(context.Background(), c.ID)
	count, _ := f.members.Count(context.Background(), c.ID)
	if outcomes["OK"] != 20 || got.CurrentMembers != 20 || count != 20 {
		t.Fatalf("outcomes %v, currentMembers %d, members %d", outcomes, got.CurrentMembers, count)
	}
	for code := range outcomes {
		if code != "OK" && code != "CREW_FULL" && code != "TOO_MANY_REQUESTS" {
			t.Fatalf("unexpected outcome %q: %v", code, outcomes)
		}
	}
}

func TestLeave_FreesASeat(t *testing.T) {
	f := newService(t)
	c := mustCreate(t, f.svc, 1)
	if _, err := join(f.svc, c.ID, "u1"); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Leave(context.Background(), appcrew.LeaveCommand{CrewID: c.ID, UserID: "u1"}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Leave(context.Background(), appcrew.LeaveCommand{CrewID: c.ID, UserID: "u1"}); !errors.Is(err, crew.ErrNotMember) {
		t.Fatalf("second leave: %v", err)
	}
	if _, err := join(f.svc, c.ID, "u2"); err != nil {
		t.Fatalf("seat not freed: %v", err)
	}
}

func TestListMembers_PagesInJoinOrder(t *testing.T) {
	f := newService(t)
	c := mustCreate(t, f.svc, 10)
	for i := range 5 {
		if _, err := join(f.svc, c.ID, fmt.Sprintf("u%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		page, err := f.svc.ListMembers(context.Background(), c.ID, 2, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Items {
			seen = append(seen, m.UserID)
		}
		if page.NextCursor == nil {
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		cursor = *page.NextCursor
	}
	if fmt.Sprint(seen) != "[u0 u1 u2 u3 u4]" {
		t.Fatalf("members %v", seen)
	}
	for _, bad := range []struct {
		limit  int
		cursor string
	}{{-1, ""}, {501, ""}, {10, "garbage!"}} {
		if _, err := f.svc.ListMembers(context.Background(), c.ID, bad.limit, bad.cursor); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
