package porttest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain/draw"
	"github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/ports"
)

// TestEventRepositories checks ports.EventRepository, ports.SeatRepository and
// ports.ReservationRepository: an event round-trips and an unknown id is
// waiting.ErrEventNotFound; SaveSlots writes; Create makes seats 1..n unreserved, and seats of
// an unknown event are waiting.ErrEventNotFound; GetForUpdate fails outside a transaction,
// names an unknown seat or another event's waiting.ErrSeatNotFound, and serialises concurrent
// reservations of one seat so exactly one succeeds; Add refuses a second reservation of a seat
// with waiting.ErrSeatAlreadyReserved, also to the losers of a race without row locks; Find
// returns a seat's reservation as stored, and none for a free seat; List pages by number;
// CountFree and Count count.
func TestEventRepositories(t *testing.T, newStores func(t *testing.T) ports.Stores, caps Capabilities) {
	run(t, newStores, caps, []testCase[ports.Stores]{
		{"Event/CreateThenGetRoundTrips", testEventRoundTrips},
		{"Event/PrequeueAndItsSeedRoundTrip", testEventPrequeueRoundTrips},
		{"Event/UnknownIDIsNotFound", testEventUnknown},
		{"Event/SaveSlotsWrites", testEventSaveSlots},
		{"Seat/CreateMakesUnreservedSeats", testSeatCreate},
		{"Seat/OfUnknownEventIsEventNotFound", testSeatsOfUnknownEvent},
		{"Seat/GetForUpdateOutsideTxFails", testSeatGetForUpdateOutsideTx},
		{"Seat/UnknownOrOtherEventsSeatIsNotFound", testSeatUnknown},
		{"Seat/ListPagesByNumber", testSeatList},
		{"Reservation/ConcurrentReservationsOfOneSeatOneWins", testReservationConcurrentLocked},
		{"Reservation/UniquePerSeatWithoutRowLock", testReservationUnique},
		{"Reservation/FindReturnsTheSeatsReservation", testReservationFind},
	})
}

// createEvent stores a new event with seats 1..seats.
func createEvent(t *testing.T, s ports.Stores, seats int) *waiting.Event {
	t.Helper()
	ctx := context.Background()
	e, err := waiting.NewEvent(randomID(), "contract event", seats, 0, waiting.ModePull, 0, now())
	must(t, err, "new event")
	must(t, s.Tx.InTx(ctx, func(ctx context.Context) error {
		if err := s.Events.Create(ctx, e); err != nil {
			return err
		}
		return s.Seats.Create(ctx, e.ID(), seats)
	}), "create event")
	return e
}

// reserveInTx is the reservation use case's transaction: lock the seat, reserve it, store both.
func reserveInTx(ctx context.Context, s ports.Stores, eventID string, seat int, userID string) error {
	return s.Tx.InTx(ctx, func(ctx context.Context) error {
		st, err := s.Seats.GetForUpdate(ctx, eventID, seat)
		if err != nil {
			return err
		}
		r, err := st.Reserve(randomID(), userID, now())
		if err != nil {
			return err
		}
		if err := s.Reservations.Add(ctx, r); err != nil {
			return err
		}
		return s.Seats.MarkReserved(ctx, eventID, seat)
	})
}

func countFree(t *testing.T, s ports.Stores, eventID string) int {
	t.Helper()
	n, err := s.Seats.CountFree(context.Background(), eventID)
	must(t, err, "count free seats")
	return n
}

func countReservations(t *testing.T, s ports.Stores, eventID string) int {
	t.Helper()
	n, err := s.Reservations.Count(context.Background(), eventID)
	must(t, err, "count reservations")
	return n
}

func testEventRoundTrips(t *testing.T, e env[ports.Stores]) {
	created := createEvent(t, e.impl, 3)
	got, err := e.impl.Events.Get(context.Background(), created.ID())
	must(t, err, "get")
	expectEqual(t, *got, *created, "event read back")
	expectEqual(t, got.TokenTTL(), 5*time.Minute, "token TTL")
}

func testEventPrequeueRoundTrips(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	ev, err := waiting.NewEvent(randomID(), "pre-queued event", 2, 0, waiting.ModePush, 0, now())
	must(t, err, "new event")
	seed, err := draw.RandomSeed()
	must(t, err, "seed")
	p, err := waiting.NewPrequeue(now().Add(time.Hour), "fifo", seed, now())
	must(t, err, "pre-queue")
	ev.SetPrequeue(p)
	must(t, e.impl.Events.Create(ctx, ev), "create")
	got, err := e.impl.Events.Get(ctx, ev.ID())
	must(t, err, "get")
	gotPrequeue, ok := got.Prequeue()
	expectEqual(t, ok, true, "has a pre-queue")
	expectEqual(t, gotPrequeue.OpensAt.Equal(p.OpensAt), true, "opensAt")
	expectEqual(t, gotPrequeue.Order, waiting.PrequeueFIFO, "order")
	expectEqual(t, gotPrequeue.Seed.Hex(), seed.Hex(), "seed")
}

func testEventUnknown(t *testing.T, e env[ports.Stores]) {
	_, err := e.impl.Events.Get(context.Background(), randomID())
	expectIs(t, err, waiting.ErrEventNotFound, "get unknown")
	expectIs(t, e.impl.Events.SaveSlots(context.Background(), randomID(), 3), waiting.ErrEventNotFound, "save slots of unknown")
}

func testEventSaveSlots(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	created := createEvent(t, e.impl, 3)
	must(t, e.impl.Events.SaveSlots(ctx, created.ID(), 7), "save slots")
	must(t, e.impl.Events.SaveSlots(ctx, created.ID(), 7), "save the same slots again")
	got, err := e.impl.Events.Get(ctx, created.ID())
	must(t, err, "get")
	expectEqual(t, got.Slots(), 7, "slots")
}

func testSeatCreate(t *testing.T, e env[ports.Stores]) {
	created := createEvent(t, e.impl, 5)
	expectEqual(t, countFree(t, e.impl, created.ID()), 5, "free seats")
	expectEqual(t, countReservations(t, e.impl, created.ID()), 0, "reservations")
}

func testSeatsOfUnknownEvent(t *testing.T, e env[ports.Stores]) {
	eventID := randomID()
	err := e.impl.Tx.InTx(context.Background(), func(ctx context.Context) error {
		return e.impl.Seats.Create(ctx, eventID, 2)
	})
	expectIs(t, err, waiting.ErrEventNotFound, "seats of an unknown event")
}

func testSeatGetForUpdateOutsideTx(t *testing.T, e env[ports.Stores]) {
	created := createEvent(t, e.impl, 1)
	if _, err := e.impl.Seats.GetForUpdate(context.Background(), created.ID(), 1); err == nil {
		t.Fatal("GetForUpdate outside a transaction succeeded")
	}
}

func testSeatUnknown(t *testing.T, e env[ports.Stores]) {
	small := createEvent(t, e.impl, 2)
	createEvent(t, e.impl, 10) // has a seat 5
	err := reserveInTx(context.Background(), e.impl, small.ID(), 5, "u")
	expectIs(t, err, waiting.ErrSeatNotFound, "seat 5 of a 2-seat event (another event has one)")
	err = reserveInTx(context.Background(), e.impl, randomID(), 1, "u")
	expectIs(t, err, waiting.ErrSeatNotFound, "seat of an unknown event")
}

func testSeatList(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	created := createEvent(t, e.impl, 5)
	must(t, reserveInTx(ctx, e.impl, created.ID(), 2, "u"), "reserve seat 2")
	first, err := e.impl.Seats.List(ctx, created.ID(), 0, 3)
	must(t, err, "first page")
	rest, err := e.impl.Seats.List(ctx, created.ID(), 3, 3)
	must(t, err, "second page")
	expectEqual(t, fmt.Sprint(first), fmt.Sprintf("[{%[1]s 1 false} {%[1]s 2 true} {%[1]s 3 false}]", created.ID()), "first page")
	expectEqual(t, fmt.Sprint(rest), fmt.Sprintf("[{%[1]s 4 false} {%[1]s 5 false}]", created.ID()), "second page")
}

func testReservationConcurrentLocked(t *testing.T, e env[ports.Stores]) {
	const n = 50
	ctx := context.Background()
	created := createEvent(t, e.impl, 2)
	errs := startTogether(n, func(i int) error {
		return reserveInTx(ctx, e.impl, created.ID(), 1, fmt.Sprintf("user-%d", i))
	})
	expectOneWinner(t, errs, waiting.ErrSeatAlreadyReserved)
	expectEqual(t, countReservations(t, e.impl, created.ID()), 1, "reservations")
	expectEqual(t, countFree(t, e.impl, created.ID()), 1, "free seats")
}

func testReservationUnique(t *testing.T, e env[ports.Stores]) {
	const n = 20
	ctx := context.Background()
	created := createEvent(t, e.impl, 1)
	errs := startTogether(n, func(i int) error {
		return e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
			return e.impl.Reservations.Add(ctx, waiting.Reservation{ID: randomID(), EventID: created.ID(),
				SeatNumber: 1, UserID: fmt.Sprintf("user-%d", i), ReservedAt: now()})
		})
	})
	expectOneWinner(t, errs, waiting.ErrSeatAlreadyReserved)
	expectEqual(t, countReservations(t, e.impl, created.ID()), 1, "reservations")
}

func testReservationFind(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	created := createEvent(t, e.impl, 2)
	_, found, err := e.impl.Reservations.Find(ctx, created.ID(), 1)
	must(t, err, "find before any reservation")
	expectEqual(t, found, false, "a free seat's reservation found")

	r := waiting.Reservation{ID: randomID(), EventID: created.ID(), SeatNumber: 1, UserID: "finder",
		ReservedAt: now()}
	must(t, e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
		if err := e.impl.Reservations.Add(ctx, r); err != nil {
			return err
		}
		return e.impl.Seats.MarkReserved(ctx, r.EventID, r.SeatNumber)
	}), "reserve")
	got, found, err := e.impl.Reservations.Find(ctx, created.ID(), 1)
	must(t, err, "find")
	expectEqual(t, found, true, "the seat's reservation found")
	expectEqual(t, got.ID, r.ID, "id")
	expectEqual(t, got.UserID, r.UserID, "user")
	expectEqual(t, got.SeatNumber, 1, "seat")
	expectEqual(t, got.ReservedAt.Equal(r.ReservedAt), true, "reservedAt")
	_, found, err = e.impl.Reservations.Find(ctx, created.ID(), 2)
	must(t, err, "find the other seat")
	expectEqual(t, found, false, "the other seat's reservation found")
}
