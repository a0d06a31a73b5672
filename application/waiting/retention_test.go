package waiting_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/application/waiting"
	domainwaiting "github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/ports"
)

// TestReconcile_AnEventWhoseRoomExpiredServesAgain: the reconciliation lets the store forget
// a room it finds empty after Config.Retention; the event's next use opens it again from the
// database: an entry is a first one, the operators' counters start from zero, the seat counter
// is the database's count, and a sold-out event is still sold out.
func TestReconcile_AnEventWhoseRoomExpiredServesAgain(t *testing.T) {
	const retention = time.Hour
	ctx := context.Background()
	clock := memory.NewClock(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	r := newRooms(clock)
	svc := waiting.NewService(r.deps, waiting.Config{Retention: retention})
	open, err := svc.CreateEvent(ctx, waiting.CreateEventCommand{Name: "open", Seats: 2, Slots: 1, Mode: "pull"})
	if err != nil {
		t.Fatal(err)
	}
	sold, err := svc.CreateEvent(ctx, waiting.CreateEventCommand{Name: "sold", Seats: 1, Slots: 1, Mode: "pull"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []waiting.EventView{open, sold} {
		if _, _, err := svc.Enter(ctx, e.ID, "u1"); err != nil {
			t.Fatal(err)
		}
		token, _, err := svc.Claim(ctx, e.ID, "u1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Reserve(ctx, waiting.ReserveCommand{EventID: e.ID, SeatID: "1", UserID: "u1", Token: token.Token}); err != nil {
			t.Fatal(err)
		}
		if err := svc.Return(ctx, e.ID, "u1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := svc.Reconcile(ctx); err != nil { // both rooms empty: they expire in an hour
		t.Fatal(err)
	}
	if q, err := svc.Queue(ctx, open.ID); err != nil || q.Claims != 1 || q.Returned != 1 {
		t.Fatalf("queue view before the retention passed: %+v, %v; want the claim and return counted", q, err)
	}

	clock.Advance(retention)
	if err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range []waiting.EventView{open, sold} {
		if _, err := r.coord.WaitingRoom.Stats(ctx, e.ID); !errors.Is(err, ports.ErrRoomNotOpen) {
			t.Fatalf("%s: the store still holds the room once the retention passed: %v", e.Name, err)
		}
	}
	q, err := svc.Queue(ctx, open.ID)
	if err != nil {
		t.Fatal(err)
	}
	if q.Claims != 0 || q.Returned != 0 || q.Waiting != 0 || q.Admitted != 0 || q.RemainingSeats != 1 || q.SoldOut {
		t.Errorf("queue view of the room opened again: %+v, want counters from zero and the one free seat", q)
	}
	status, created, err := svc.Enter(ctx, open.ID, "u2")
	if err != nil || !created || status.Status != waiting.StatusWaiting && status.Status != waiting.StatusReady {
		t.Errorf("entry into the room opened again: %+v, created %v, %v", status, created, err)
	}
	if _, _, err := svc.Enter(ctx, sold.ID, "u2"); !errors.Is(err, domainwaiting.ErrSoldOut) {
		t.Errorf("entry into the sold-out event's room opened again: %v, want sold out", err)
	}
}

// listedWithoutRoom is the in-memory store listing one event more than it holds a room for, as
// a Redis restarted from a log cut between an event's listing and its room's keys does.
type listedWithoutRoom struct {
	*memory.WaitingRoom
	eventID string
}

func (r listedWithoutRoom) Events(ctx context.Context) ([]string, error) {
	events, err := r.WaitingRoom.Events(ctx)
	return append(events, r.eventID), err
}

// TestReconcile_AListedEventWithoutARoomHasItOpenedAgain: the store lists an event before it
// writes the room, so a Redis that lost the last writes can list an event with no room. The
// reconciliation pass opens that room again from the database (the slots and the free seats),
// and then passes over it as over any other: it is the one that finds it empty.
func TestReconcile_AListedEventWithoutARoomHasItOpenedAgain(t *testing.T) {
	const retention = time.Hour
	ctx := context.Background()
	clock := memory.NewClock(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	r := newRooms(clock)
	svc := waiting.NewService(r.deps, waiting.Config{Retention: retention})
	e, err := svc.CreateEvent(ctx, waiting.CreateEventCommand{Name: "lost", Seats: 3, Slots: 2, Mode: "push"})
	if err != nil {
		t.Fatal(err)
	}
	// The room found empty, then forgotten after the retention: no room, no listing.
	if err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(retention)
	if err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	store := r.coord.WaitingRoom.(*memory.WaitingRoom)
	if _, err := store.Stats(ctx, e.ID); !errors.Is(err, ports.ErrRoomNotOpen) {
		t.Fatalf("the store holds the room after the retention: %v", err)
	}

	r.deps.Room = listedWithoutRoom{WaitingRoom: store, eventID: e.ID}
	if err := waiting.NewService(r.deps, waiting.Config{Retention: retention}).Reconcile(ctx); err != nil {
		t.Fatalf("a pass over the listed event without a room: %v", err)
	}
	stats, err := store.Stats(ctx, e.ID)
	if err != nil {
		t.Fatalf("the room after the pass: %v", err)
	}
	if stats.Slots != 2 || stats.RemainingSeats != 3 || stats.Waiting != 0 {
		t.Errorf("the room opened again: %+v, want the database's 2 slots and 3 free seats", stats)
	}
	if events, err := store.Events(ctx); err != nil || len(events) != 0 {
		t.Errorf("events in use after the pass found the room empty: %v, %v", events, err)
	}
}
