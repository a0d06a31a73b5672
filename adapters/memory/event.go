package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.EventRepository       = (*EventRepository)(nil)
	_ ports.SeatRepository        = (*SeatRepository)(nil)
	_ ports.ReservationRepository = (*ReservationRepository)(nil)
)

func eventKeyOf(e waiting.Event) string { return e.ID() }

var eventsTable = declareTable("events", eventKeyOf)

// seatKey is a seat's primary key (eventId, number).
type seatKey struct {
	eventID string
	number  int
}

func seatKeyOf(s waiting.Seat) seatKey { return seatKey{s.EventID, s.Number} }

var seatsTable = declarePartitionedTable("seats", seatKeyOf, seatKey.event)

// event partitions seats and reservations by event.
func (k seatKey) event() string { return k.eventID }

// reservationKeyOf keys reservations by their seat: UNIQUE(eventId, seat).
func reservationKeyOf(r waiting.Reservation) seatKey { return seatKey{r.EventID, r.SeatNumber} }

var reservationsTable = declarePartitionedTable("reservations", reservationKeyOf, seatKey.event)

// EventRepository stores events in a Database.
type EventRepository struct{ db *Database }

// NewEventRepository returns an EventRepository on d.
func NewEventRepository(d *Database) *EventRepository { return &EventRepository{db: d} }

// Create inserts e; an existing id is a duplicate-key error.
func (r *EventRepository) Create(ctx context.Context, e *waiting.Event) error {
	return r.db.run(ctx, func(t *tx) error { return eventsTable.in(r.db).insert(ctx, t, *e) })
}

// Get returns a copy of the event, or waiting.ErrEventNotFound.
func (r *EventRepository) Get(ctx context.Context, id string) (*waiting.Event, error) {
	var found waiting.Event
	err := r.db.run(ctx, func(t *tx) error {
		e, ok := eventsTable.in(r.db).get(t, id)
		if !ok {
			return waiting.ErrEventNotFound
		}
		found = e
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &found, nil
}

// SaveSlots writes the event's slots under its row lock.
func (r *EventRepository) SaveSlots(ctx context.Context, id string, slots int) error {
	return r.db.run(ctx, func(t *tx) error {
		e, ok, err := eventsTable.in(r.db).getForUpdate(ctx, t, id)
		if err != nil {
			return err
		}
		if !ok {
			return waiting.ErrEventNotFound
		}
		if err := e.SetSlots(slots); err != nil {
			return err
		}
		return eventsTable.in(r.db).put(ctx, t, e)
	})
}

// SeatRepository stores seats in a Database.
type SeatRepository struct{ db *Database }

// NewSeatRepository returns a SeatRepository on d.
func NewSeatRepository(d *Database) *SeatRepository { return &SeatRepository{db: d} }

// Create inserts seats 1..seats of the event, unreserved; an unknown event violates the foreign
// key (waiting.ErrEventNotFound).
func (r *SeatRepository) Create(ctx context.Context, eventID string, seats int) error {
	rows := make([]waiting.Seat, seats)
	for i := range rows {
		rows[i] = waiting.Seat{EventID: eventID, Number: i + 1}
	}
	return r.db.run(ctx, func(t *tx) error {
		if _, ok := eventsTable.in(r.db).get(t, eventID); !ok {
			return fmt.Errorf("memory: create seats: foreign key event %q: %w", eventID, waiting.ErrEventNotFound)
		}
		return seatsTable.in(r.db).insert(ctx, t, rows...)
	})
}

// GetForUpdate locks the seat's row until the transaction ends and returns it, or
// waiting.ErrSeatNotFound. It fails outside InTx.
func (r *SeatRepository) GetForUpdate(ctx context.Context, eventID string, number int) (*waiting.Seat, error) {
	var found waiting.Seat
	err := r.db.runInTx(ctx, func(t *tx) error {
		s, ok, err := seatsTable.in(r.db).getForUpdate(ctx, t, seatKey{eventID, number})
		if err != nil {
			return err
		}
		if !ok {
			return waiting.ErrSeatNotFound
		}
		found = s
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &found, nil
}

// MarkReserved marks the seat reserved under its row lock.
func (r *SeatRepository) MarkReserved(ctx context.Context, eventID string, number int) error {
	return r.db.run(ctx, func(t *tx) error {
		s, ok, err := seatsTable.in(r.db).getForUpdate(ctx, t, seatKey{eventID, number})
		if err != nil {
			return err
		}
		if !ok {
			return waiting.ErrSeatNotFound
		}
		s.Reserved = true
		return seatsTable.in(r.db).put(ctx, t, s)
	})
}

// List returns up to limit seats of the event by number, after `after`.
func (r *SeatRepository) List(ctx context.Context, eventID string, after, limit int) ([]waiting.Seat, error) {
	var page []waiting.Seat
	err := r.db.run(ctx, func(t *tx) error {
		seats := slices.DeleteFunc(seatsTable.in(r.db).rowsIn(t, eventID), func(s waiting.Seat) bool { return s.Number <= after })
		slices.SortFunc(seats, func(a, b waiting.Seat) int { return a.Number - b.Number })
		page = seats[:min(max(limit, 0), len(seats))]
		return nil
	})
	return page, err
}

// CountFree counts the event's unreserved seats.
func (r *SeatRepository) CountFree(ctx context.Context, eventID string) (int, error) {
	n := 0
	err := r.db.run(ctx, func(t *tx) error {
		for _, s := range seatsTable.in(r.db).rowsIn(t, eventID) {
			if !s.Reserved {
				n++
			}
		}
		return nil
	})
	return n, err
}

// ReservationRepository stores reservations in a Database.
type ReservationRepository struct{ db *Database }

// NewReservationRepository returns a ReservationRepository on d.
func NewReservationRepository(d *Database) *ReservationRepository {
	return &ReservationRepository{db: d}
}

// Add inserts the reservation; a seat reserved already (even by a concurrent transaction that
// commits first) is waiting.ErrSeatAlreadyReserved, a seat that does not exist
// waiting.ErrSeatNotFound.
func (r *ReservationRepository) Add(ctx context.Context, res waiting.Reservation) error {
	return r.db.run(ctx, func(t *tx) error {
		if _, ok := seatsTable.in(r.db).get(t, seatKey{res.EventID, res.SeatNumber}); !ok {
			return fmt.Errorf("memory: add reservation: foreign key seat: %w", waiting.ErrSeatNotFound)
		}
		err := reservationsTable.in(r.db).insert(ctx, t, res)
		if errors.Is(err, errDuplicateKey) {
			return waiting.ErrSeatAlreadyReserved
		}
		return err
	})
}

// Find returns the reservation of the event's seat; false when the seat has none.
func (r *ReservationRepository) Find(ctx context.Context, eventID string, seat int) (waiting.Reservation, bool, error) {
	var (
		res   waiting.Reservation
		found bool
	)
	err := r.db.run(ctx, func(t *tx) error {
		res, found = reservationsTable.in(r.db).get(t, seatKey{eventID, seat})
		return nil
	})
	return res, found, err
}

// Count counts the event's reservations.
func (r *ReservationRepository) Count(ctx context.Context, eventID string) (int, error) {
	n := 0
	err := r.db.run(ctx, func(t *tx) error {
		n = len(reservationsTable.in(r.db).rowsIn(t, eventID))
		return nil
	})
	return n, err
}

// NewWaitingStores returns the event, seat and reservation repositories on d.
func NewWaitingStores(d *Database) ports.WaitingStores {
	return ports.WaitingStores{Events: NewEventRepository(d), Seats: NewSeatRepository(d), Reservations: NewReservationRepository(d)}
}
