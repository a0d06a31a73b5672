package waiting_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/memory/memorytest"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/application/waiting"
	domainwaiting "github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

// rooms is the waiting-room use cases on in-memory adapters, and the Deps of a push broker and
// dispatcher on the same ports.
type rooms struct {
	stores     ports.Stores
	coord      ports.Coordination
	deps       waiting.Deps // svc's
	svc        *waiting.Service
	broker     waiting.BrokerDeps
	dispatcher waiting.DispatcherDeps
}

// newRooms builds rooms whose time is clock.
func newRooms(clock *memory.Clock) rooms { return newRoomsWaitingOn(clock, nil) }

// newRoomsWaitingOn builds rooms whose service waits for pre-queue openings on sleeper (none
// when nil: the reconciliation pass opens them).
func newRoomsWaitingOn(clock *memory.Clock, sleeper ports.Sleeper) rooms {
	env := memorytest.New(memorytest.WithClock(clock, memory.NewSleeper(clock)))
	stores, coord := env.Stores, env.Coord
	rates := waiting.NewAdmissionRates()
	deps := waiting.Deps{Tx: stores.Tx, Events: stores.Events, Seats: stores.Seats, Reservations: stores.Reservations,
		Room: coord.WaitingRoom, Guard: env.Guard, Clock: clock, IDs: system.UUIDs{}, Rates: rates, Sleeper: sleeper}
	return rooms{
		stores: stores,
		coord:  coord,
		deps:   deps,
		svc:    waiting.NewService(deps, waiting.Config{}),
		broker: waiting.BrokerDeps{Events: stores.Events, Seats: stores.Seats, Rooms: coord.WaitingRoom,
			Queue: coord.PushQueue, Rates: rates, Clock: clock},
		dispatcher: waiting.DispatcherDeps{Events: stores.Events, Seats: stores.Seats, Rooms: coord.WaitingRoom,
			Index: coord.WaitingRoom, Queue: coord.PushQueue, Clock: clock},
	}
}

func TestStatus_EstimatedWaitComesFromTheRecentAdmissionRate(t *testing.T) {
	ctx := context.Background()
	clock := memory.NewClock(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	svc := newRooms(clock).svc
	event, err := svc.CreateEvent(ctx, waiting.CreateEventCommand{Name: "rate", Seats: 10, Slots: 2, Mode: "pull"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if _, _, err := svc.Enter(ctx, event.ID, fmt.Sprint("u", i)); err != nil {
			t.Fatal(err)
		}
	}
	before, err := svc.Status(ctx, event.ID, "u5")
	if err != nil {
		t.Fatal(err)
	}
	if before.AheadCount != 4 || before.EstimatedWaitSeconds != nil {
		t.Fatalf("before any admission: %+v, want aheadCount 4 and no estimate", before)
	}
	if err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	// Two admissions (claimed, then returned) in one second: 2 per second.
	for _, u := range []string{"u0", "u1"} {
		if _, _, err := svc.Claim(ctx, event.ID, u); err != nil {
			t.Fatal(err)
		}
		if err := svc.Return(ctx, event.ID, u); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Second)
	if err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := svc.Status(ctx, event.ID, "u5")
	if err != nil {
		t.Fatal(err)
	}
	// u5 is 3rd of the waiting with 2 slots free: 2 admissions ahead, at 2/s one second.
	if after.Status != waiting.StatusWaiting || after.Rank != 3 || after.AheadCount != 2 ||
		after.EstimatedWaitSeconds == nil || *after.EstimatedWaitSeconds != 1 {
		t.Fatalf("after: %+v (estimate %v)", after, after.EstimatedWaitSeconds)
	}
	queue, err := svc.Queue(ctx, event.ID)
	if err != nil {
		t.Fatal(err)
	}
	if queue.AdmissionRate == nil || *queue.AdmissionRate != 2 || queue.Claims != 2 || queue.Returned != 2 {
		t.Fatalf("queue: %+v", queue)
	}
}

// A poll within the sign-of-life step writes nothing, yet the user stays for a whole idle
// timeout after it; a user silent for the timeout and a step is dropped.
func TestReconcile_DropsAPullUserIdleForTheTimeoutNeverBefore(t *testing.T) {
	ctx := context.Background()
	clock := memory.NewClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	svc := newRooms(clock).svc
	event, err := svc.CreateEvent(ctx, waiting.CreateEventCommand{Name: "idle", Seats: 10, Slots: 1, Mode: "pull"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Enter(ctx, event.ID, "poller"); err != nil {
		t.Fatal(err)
	}
	status := func(user string) error {
		_, err := svc.Status(ctx, event.ID, user)
		return err
	}
	clock.Advance(time.Second)
	if err := status("poller"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(waiting.DefaultIdleTimeout - time.Second)
	if err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if err := status("poller"); err != nil {
		t.Fatalf("dropped %v after its last poll, before the idle timeout: %v", waiting.DefaultIdleTimeout-time.Second, err)
	}
	clock.Advance(waiting.DefaultIdleTimeout + waiting.DefaultIdleTimeout/8)
	if err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if err := status("poller"); !errors.Is(err, domainwaiting.ErrNotInQueue) {
		t.Fatalf("silent for the idle timeout and a step: %v, want %v", err, domainwaiting.ErrNotInQueue)
	}
}

// deadlineEvents and deadlineSeats record the deadline each read of an event, each seat lock and
// each count of free seats received.
type deadlineEvents struct {
	ports.EventRepository
	*testkit.Deadlines
}

func (d deadlineEvents) Get(ctx context.Context, id string) (*domainwaiting.Event, error) {
	d.Record(ctx, "Events.Get")
	return d.EventRepository.Get(ctx, id)
}

func (d deadlineEvents) SaveSlots(ctx context.Context, id string, slots int) error {
	d.Record(ctx, "Events.SaveSlots")
	return d.EventRepository.SaveSlots(ctx, id, slots)
}

type deadlineSeats struct {
	ports.SeatRepository
	*testkit.Deadlines
}

func (d deadlineSeats) GetForUpdate(ctx context.Context, eventID string, number int) (*domainwaiting.Seat, error) {
	d.Record(ctx, "Seats.GetForUpdate")
	return d.SeatRepository.GetForUpdate(ctx, eventID, number)
}

func (d deadlineSeats) CountFree(ctx context.Context, eventID string) (int, error) {
	d.Record(ctx, "Seats.CountFree")
	return d.SeatRepository.CountFree(ctx, eventID)
}

func (d deadlineSeats) List(ctx context.Context, eventID string, after, limit int) ([]domainwaiting.Seat, error) {
	d.Record(ctx, "Seats.List")
	return d.SeatRepository.List(ctx, eventID, after, limit)
}

// TestReserve_TheEventReadAndTheTransactionShareOneDatabaseTimeout: an instance's first
// reservation of an event reads the event before the seat's lock, then locks the seat in its
// batch's transaction, and, having taken the last seat, counts the free seats before its answer
// to settle the seat counter; all run until one Config.Timeout after the reservation's arrival
// (its wait for the lock, none here, aside), not one timeout each.
func TestReserve_TheEventReadAndTheTransactionShareOneDatabaseTimeout(t *testing.T) {
	const timeout = time.Hour // never reached: only the deadlines are read
	ctx := context.Background()
	clock := memory.NewClock(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	r := newRooms(clock)
	eventID, token := admittedUser(t, r, 1, "u1")
	deadlines := &testkit.Deadlines{}
	deps := r.deps
	deps.Events = deadlineEvents{EventRepository: deps.Events, Deadlines: deadlines}
	deps.Seats = deadlineSeats{SeatRepository: deps.Seats, Deadlines: deadlines}
	// Another instance: it has not read the event yet.
	svc := waiting.NewService(deps, waiting.Config{Timeout: timeout})

	before := time.Now()
	if _, err := svc.Reserve(ctx, waiting.ReserveCommand{EventID: eventID, SeatID: "1", UserID: "u1", Token: token}); err != nil {
		t.Fatal(err)
	}
	deadlines.AssertOneTimeoutFromArrival(t, timeout, before, time.Now(), "Events.Get", "Seats.GetForUpdate", "Seats.CountFree")
}

// TestRoomOpenedAgain_ItsReadsShareTheRequestsDatabaseTimeout: a request that finds its event's
// room gone from the store (a Redis restarted empty) reads the event and its free seats to open
// it again; those reads run until one Config.Timeout (BrokerConfig.Timeout for a push join)
// after the request's arrival, the timeout its other database work (a slot change's write, the
// event read back, the views' counts) shares, not one timeout each. A reservation's token went
// with the room, so it answers TOKEN_REQUIRED there. The seat list, which opens no room, shares
// it between the event's read and the page's.
func TestRoomOpenedAgain_ItsReadsShareTheRequestsDatabaseTimeout(t *testing.T) {
	const timeout = time.Hour // never reached: only the deadlines are read
	ctx := context.Background()
	clock := memory.NewClock(time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC))
	r := newRooms(clock)
	pull, err := r.svc.CreateEvent(ctx, waiting.CreateEventCommand{Name: "lost pull", Seats: 2, Slots: 2, Mode: "pull"})
	if err != nil {
		t.Fatal(err)
	}
	push, err := r.svc.CreateEvent(ctx, waiting.CreateEventCommand{Name: "lost push", Seats: 2, Slots: 2, Mode: "push"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.svc.Enter(ctx, pull.ID, "u1"); err != nil {
		t.Fatal(err)
	}
	token, _, err := r.svc.Claim(ctx, pull.ID, "u1")
	if err != nil {
		t.Fatal(err)
	}
	reopening := []string{"Events.Get", "Seats.CountFree"}
	reads := map[string][]string{ // the reads each request makes; reopening when unlisted
		"slot change": append([]string{"Events.SaveSlots"}, reopening...),
		"seat list":   {"Events.Get", "Seats.List"},
	}
	requests := map[string]func(*waiting.Service, *waiting.Broker) error{
		"reserve": func(svc *waiting.Service, _ *waiting.Broker) error {
			_, err := svc.Reserve(ctx, waiting.ReserveCommand{EventID: pull.ID, SeatID: "1", UserID: "u1", Token: token.Token})
			return err
		},
		"enter": func(svc *waiting.Service, _ *waiting.Broker) error {
			_, _, err := svc.Enter(ctx, pull.ID, "u1")
			return err
		},
		"status": func(svc *waiting.Service, _ *waiting.Broker) error {
			_, err := svc.Status(ctx, pull.ID, "u1")
			return err
		},
		"claim": func(svc *waiting.Service, _ *waiting.Broker) error {
			_, _, err := svc.Claim(ctx, pull.ID, "u1")
			return err
		},
		"return": func(svc *waiting.Service, _ *waiting.Broker) error { return svc.Return(ctx, pull.ID, "u1") },
		"leave":  func(svc *waiting.Service, _ *waiting.Broker) error { return svc.Leave(ctx, pull.ID, "u1") },
		"push join": func(_ *waiting.Service, b *waiting.Broker) error {
			_, err := b.Join(ctx, push.ID, "u1", &stream{broker: b})
			return err
		},
		"admin view": func(svc *waiting.Service, _ *waiting.Broker) error {
			_, err := svc.Queue(ctx, pull.ID)
			return err
		},
		"slot change": func(svc *waiting.Service, _ *waiting.Broker) error {
			_, err := svc.SetSlots(ctx, pull.ID, 3)
			return err
		},
		"public event view": func(svc *waiting.Service, _ *waiting.Broker) error {
			_, err := svc.Event(ctx, pull.ID)
			return err
		},
		"seat list": func(svc *waiting.Service, _ *waiting.Broker) error {
			_, err := svc.ListSeats(ctx, pull.ID, 0, "")
			return err
		},
	}
	for name, request := range requests {
		t.Run(name, func(t *testing.T) {
			deadlines := &testkit.Deadlines{}
			lost := memory.NewWaitingRoom(clock) // the store lost every room
			deps := r.deps
			deps.Events = deadlineEvents{EventRepository: deps.Events, Deadlines: deadlines}
			deps.Seats = deadlineSeats{SeatRepository: deps.Seats, Deadlines: deadlines}
			deps.Room = lost
			brokerDeps := r.broker
			brokerDeps.Events, brokerDeps.Seats, brokerDeps.Rooms, brokerDeps.Queue = deps.Events, deps.Seats, lost, lost
			svc := waiting.NewService(deps, waiting.Config{Timeout: timeout})
			broker := waiting.NewBroker(brokerDeps, "broker-1", waiting.BrokerConfig{Timeout: timeout})

			before := time.Now()
			err := request(svc, broker)
			t.Logf("answer: %v", err)
			calls, ok := reads[name]
			if !ok {
				calls = reopening
			}
			deadlines.AssertOneTimeoutFromArrival(t, timeout, before, time.Now(), calls...)
		})
	}
}

// roomLostOnce is the in-memory store answering the first marking of sold out, snapshot or
// promotion that it has no room for the event, as a store restarted empty would: the caller
// opens the room again from the database (which finds it open still) and asks again.
type roomLostOnce struct {
	*memory.WaitingRoom
	lost atomic.Bool
}

func (r *roomLostOnce) notOpen() bool { return r.lost.CompareAndSwap(false, true) }

func (r *roomLostOnce) MarkSoldOut(ctx context.Context, eventID string) error {
	if r.notOpen() {
		return ports.ErrRoomNotOpen
	}
	return r.WaitingRoom.MarkSoldOut(ctx, eventID)
}

func (r *roomLostOnce) Snapshot(ctx context.Context, eventID string) (ports.QueueSnapshot, error) {
	if r.notOpen() {
		return ports.QueueSnapshot{}, ports.ErrRoomNotOpen
	}
	return r.WaitingRoom.Snapshot(ctx, eventID)
}

func (r *roomLostOnce) Promote(ctx context.Context, eventID string, ttl time.Duration, read ports.EntryRead) (int, []ports.Promotion, error) {
	if r.notOpen() {
		return 0, nil, ports.ErrRoomNotOpen
	}
	return r.WaitingRoom.Promote(ctx, eventID, ttl, read)
}

// TestRoomOpenedAgain_ByABackgroundPassItsReadsShareOneDatabaseTimeoutPerEvent: the background
// passes read the database too: the reconciliation reads an event (on its first pass here) and
// counts its free seats (the seat counter's repair), the dispatcher's tick and promotion read the
// event, and the reconciliation marking a room sold out, the broadcast and the promotion read
// the event and its free seats again to open a room the store lost. An event's reads in a pass
// run until one timeout (Config.Timeout, BrokerConfig.Timeout, DispatcherConfig.Timeout) after
// the pass reached it, not one timeout each, so a slow database holds the next event and the
// next tick up by one timeout at most.
func TestRoomOpenedAgain_ByABackgroundPassItsReadsShareOneDatabaseTimeoutPerEvent(t *testing.T) {
	const timeout = time.Hour // never reached: only the deadlines are read
	ctx := context.Background()
	clock := memory.NewClock(time.Date(2026, 12, 9, 9, 0, 0, 0, time.UTC))
	reopening := []string{"Events.Get", "Seats.CountFree"}
	passes := map[string]struct {
		mode  string
		reads []string
		// reopens: the pass meets the store's answer that it lost the room.
		reopens bool
		// prepare readies the pass on another instance's r, whose reads are recorded.
		prepare func(t *testing.T, r rooms, eventID string) (pass func(context.Context) error)
	}{
		"reconciliation": {mode: "pull", reads: reopening, prepare: func(_ *testing.T, r rooms, _ string) func(context.Context) error {
			return waiting.NewService(r.deps, waiting.Config{Timeout: timeout}).Reconcile
		}},
		"reconciliation of a sold-out event": {mode: "pull", reads: reopening, reopens: true, prepare: func(t *testing.T, r rooms, eventID string) func(context.Context) error {
			// The first instance reserves the last seat; the pass marks the room sold out.
			if _, _, err := r.svc.Enter(ctx, eventID, "u1"); err != nil {
				t.Fatal(err)
			}
			token, _, err := r.svc.Claim(ctx, eventID, "u1")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.svc.Reserve(ctx, waiting.ReserveCommand{EventID: eventID, SeatID: "1", UserID: "u1", Token: token.Token}); err != nil {
				t.Fatal(err)
			}
			return waiting.NewService(r.deps, waiting.Config{Timeout: timeout}).Reconcile
		}},
		"broadcast": {mode: "push", reads: reopening, reopens: true, prepare: func(t *testing.T, r rooms, eventID string) func(context.Context) error {
			b := waiting.NewBroker(r.broker, "broker-1", waiting.BrokerConfig{Timeout: timeout})
			join(t, b, eventID, "u1", false)
			return func(ctx context.Context) error { b.Tick(ctx); return nil }
		}},
		"dispatcher tick": {mode: "push", reads: []string{"Events.Get"}, prepare: func(_ *testing.T, r rooms, _ string) func(context.Context) error {
			return waiting.NewDispatcher(r.dispatcher, "dispatcher-1", waiting.DispatcherConfig{Timeout: timeout}).Tick
		}},
		"promotion": {mode: "push", reads: reopening, reopens: true, prepare: func(_ *testing.T, r rooms, eventID string) func(context.Context) error {
			d := waiting.NewDispatcher(r.dispatcher, "dispatcher-1", waiting.DispatcherConfig{Timeout: timeout})
			return func(ctx context.Context) error { return d.Promote(ctx, eventID) }
		}},
	}
	for name, p := range passes {
		t.Run(name, func(t *testing.T) {
			r := newRooms(clock)
			event, err := r.svc.CreateEvent(ctx, waiting.CreateEventCommand{Name: name, Seats: 1, Slots: 1, Mode: p.mode})
			if err != nil {
				t.Fatal(err)
			}
			deadlines := &testkit.Deadlines{}
			events := deadlineEvents{EventRepository: r.deps.Events, Deadlines: deadlines}
			seats := deadlineSeats{SeatRepository: r.deps.Seats, Deadlines: deadlines}
			store := &roomLostOnce{WaitingRoom: r.coord.WaitingRoom.(*memory.WaitingRoom)}
			r.deps.Events, r.deps.Seats, r.deps.Room = events, seats, store
			r.broker.Events, r.broker.Seats, r.broker.Rooms, r.broker.Queue = events, seats, store, store
			r.dispatcher.Events, r.dispatcher.Seats, r.dispatcher.Rooms, r.dispatcher.Index, r.dispatcher.Queue = events, seats, store, store, store
			pass := p.prepare(t, r, event.ID)

			before := time.Now()
			if err := pass(ctx); err != nil {
				t.Fatal(err)
			}
			if store.lost.Load() != p.reopens {
				t.Fatalf("the store answered it lost the room: %v, want %v", store.lost.Load(), p.reopens)
			}
			deadlines.AssertOneTimeoutFromArrival(t, timeout, before, time.Now(), p.reads...)
		})
	}
}

// TestReserve_ACommitWhoseAnswerWasLostIsAnsweredByTheStoredReservation: a reservation whose
// transaction's COMMIT outcome is unknown (its connection lost during it) reads the seat's
// reservation: when the transaction committed, the client hears its reservation, not a 503 it
// would retry only to find the seat taken; when it did not, it hears 503 and its retry reserves.
func TestReserve_ACommitWhoseAnswerWasLostIsAnsweredByTheStoredReservation(t *testing.T) {
	for _, committed := range []bool{true, false} {
		t.Run(fmt.Sprintf("committed=%v", committed), func(t *testing.T) {
			ctx := context.Background()
			clock := memory.NewClock(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
			r := newRooms(clock)
			eventID, token := admittedUser(t, r, 2, "u1")
			deps := r.deps
			deps.Tx = testkit.CommitLostTx{Inner: deps.Tx, Committed: committed}
			lost := waiting.NewService(deps, waiting.Config{})
			reserve := waiting.ReserveCommand{EventID: eventID, SeatID: "1", UserID: "u1", Token: token}

			view, err := lost.Reserve(ctx, reserve)

			stored, found, findErr := r.stores.Reservations.Find(ctx, eventID, 1)
			if findErr != nil {
				t.Fatal(findErr)
			}
			if !committed {
				if !errors.Is(err, ports.ErrUnavailable) || found {
					t.Fatalf("not committed: answered %+v, %v; reservation stored: %v; want 503 and none", view, err, found)
				}
				retried, err := r.svc.Reserve(ctx, reserve)
				if err != nil {
					t.Fatalf("the retry: %v", err)
				}
				if stored, found, _ := r.stores.Reservations.Find(ctx, eventID, 1); !found || stored.ID != retried.ID {
					t.Fatalf("the retry answered %+v, stored %+v (%v)", retried, stored, found)
				}
				return
			}
			if err != nil {
				t.Fatalf("committed: answered %v, want the reservation", err)
			}
			if !found || stored.ID != view.ID || stored.UserID != "u1" || view.SeatID != "1" {
				t.Fatalf("answered %+v, stored %+v (%v)", view, stored, found)
			}
			if n, err := r.stores.Seats.CountFree(ctx, eventID); err != nil || n != 1 {
				t.Fatalf("free seats %d (%v), want 1", n, err)
			}
		})
	}
}

// admittedUser creates a pull event of seats seats and two slots, and admits userID: it answers
// the event's id and the user's entry token.
func admittedUser(t *testing.T, r rooms, seats int, userID string) (eventID, token string) {
	t.Helper()
	ctx := context.Background()
	event, err := r.svc.CreateEvent(ctx, waiting.CreateEventCommand{Name: "reservations", Seats: seats, Slots: 2, Mode: "pull"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.svc.Enter(ctx, event.ID, userID); err != nil {
		t.Fatal(err)
	}
	claimed, _, err := r.svc.Claim(ctx, event.ID, userID)
	if err != nil {
		t.Fatal(err)
	}
	return event.ID, claimed.Token
}
