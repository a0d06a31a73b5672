package gormdb

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rushgate/rushgate/domain/draw"
	"github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.EventRepository       = (*EventRepository)(nil)
	_ ports.SeatRepository        = (*SeatRepository)(nil)
	_ ports.ReservationRepository = (*ReservationRepository)(nil)
)

// EventRepository stores events; it implements ports.EventRepository.
type EventRepository struct {
	db                          *DB
	createSQL, getSQL, slotsSQL string
}

// NewEventRepository returns the event repository of db.
func NewEventRepository(db *DB) *EventRepository {
	return &EventRepository{
		db: db,
		createSQL: Bind(db.dialect, "INSERT INTO events (id, name, seats, slots, mode, token_ttl_ms, created_at, opens_at, prequeue, seed) "+
			"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
		getSQL: Bind(db.dialect, "SELECT id, name, seats, slots, mode, token_ttl_ms, created_at, opens_at, prequeue, seed "+
			"FROM events WHERE id = ?"),
		slotsSQL: Bind(db.dialect, "UPDATE events SET slots = ? WHERE id = ?"),
	}
}

// Create inserts a new event, with its pre-queue's seed if it has one.
func (r *EventRepository) Create(ctx context.Context, e *waiting.Event) error {
	var (
		opensAt sql.NullTime
		order   sql.NullString
		seed    []byte
	)
	if p, ok := e.Prequeue(); ok {
		opensAt, order, seed = sql.NullTime{Time: p.OpensAt.UTC(), Valid: true}, nullable(string(p.Order)), p.Seed.Bytes()
	}
	_, err := r.db.exec(ctx, errorMeanings{op: "create event"}, r.createSQL,
		e.ID(), e.Name(), e.Seats(), e.Slots(), string(e.Mode()), e.TokenTTL().Milliseconds(), e.CreatedAt().UTC(),
		opensAt, order, seed)
	return err
}

// Get returns the event, or waiting.ErrEventNotFound.
func (r *EventRepository) Get(ctx context.Context, id string) (*waiting.Event, error) {
	var (
		name, mode   string
		seats, slots int
		ttlMillis    int64
		createdAt    time.Time
		opensAt      sql.NullTime
		order        sql.NullString
		seedBytes    []byte
	)
	found, err := r.db.queryOne(ctx, errorMeanings{op: "get event"}, r.getSQL, []any{id}, func(rows *sql.Rows) error {
		return rows.Scan(&id, &name, &seats, &slots, &mode, &ttlMillis, &createdAt, &opensAt, &order, &seedBytes)
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, waiting.ErrEventNotFound
	}
	e := waiting.RebuildEvent(id, name, seats, slots, waiting.Mode(mode), time.Duration(ttlMillis)*time.Millisecond, createdAt.UTC())
	if opensAt.Valid {
		seed, err := draw.SeedFromBytes(seedBytes)
		if err != nil {
			return nil, fmt.Errorf("gormdb: get event: %w", err)
		}
		e.SetPrequeue(waiting.Prequeue{OpensAt: opensAt.Time.UTC(), Order: waiting.PrequeueOrder(order.String), Seed: seed})
	}
	return e, nil
}

// SaveSlots writes the event's slots, or answers waiting.ErrEventNotFound when no event has the
// id (MySQL too counts the rows matched, not changed: ClientFoundRows). Outside a transaction,
// a run whose connection was lost runs again (rerunIdempotent): writing the same value twice
// leaves what writing it once does.
func (r *EventRepository) SaveSlots(ctx context.Context, id string, slots int) error {
	return r.db.rerunIdempotent(ctx, func(ctx context.Context) error {
		updated, err := r.db.exec(ctx, errorMeanings{op: "save event slots"}, r.slotsSQL, slots, id)
		if err == nil && updated == 0 {
			return waiting.ErrEventNotFound
		}
		return err
	})
}

// seatChunk bounds one MySQL INSERT of seats: one parameter per row keeps it far below its
// 65,535.
const seatChunk = 5000

// SeatRepository stores seats; it implements ports.SeatRepository.
type SeatRepository struct {
	db                                            *DB
	getForUpdateSQL, reserveSQL, listSQL, freeSQL string
}

// NewSeatRepository returns the seat repository of db.
func NewSeatRepository(db *DB) *SeatRepository {
	return &SeatRepository{
		db:              db,
		getForUpdateSQL: Bind(db.dialect, "SELECT reserved FROM seats WHERE event_id = ? AND seat_no = ? FOR UPDATE"),
		reserveSQL:      Bind(db.dialect, "UPDATE seats SET reserved = ? WHERE event_id = ? AND seat_no = ?"),
		listSQL:         Bind(db.dialect, "SELECT seat_no, reserved FROM seats WHERE event_id = ? AND seat_no > ? ORDER BY seat_no LIMIT ?"),
		freeSQL:         Bind(db.dialect, "SELECT COUNT(*) FROM seats WHERE event_id = ? AND reserved = ?"),
	}
}

// Create inserts seats 1..seats of the event (in chunks of seatChunk rows on MySQL); run it in the
// event's transaction to make it all or none.
func (r *SeatRepository) Create(ctx context.Context, eventID string, seats int) error {
	m := errorMeanings{op: "create seats", notFound: waiting.ErrEventNotFound}
	if r.db.dialect == Postgres {
		// One statement whose rows Postgres makes itself: a hundred thousand seats in a few
		// hundred milliseconds, where the chunks' parameters took most of a transaction's second.
		_, err := r.db.exec(ctx, m, "INSERT INTO seats (event_id, seat_no) SELECT $1, generate_series(1, $2::int)", eventID, seats)
		return err
	}
	for first := 1; first <= seats; first += seatChunk {
		last := min(first+seatChunk-1, seats)
		var b strings.Builder
		b.WriteString("INSERT INTO seats (event_id, seat_no) VALUES ")
		args := make([]any, 0, last-first+1)
		for n := first; n <= last; n++ {
			if n > first {
				b.WriteString(", ")
			}
			// Seat numbers are integers this code generates: safe as literals.
			b.WriteString("(?, " + strconv.Itoa(n) + ")")
			args = append(args, eventID)
		}
		_, err := r.db.exec(ctx, m, Bind(r.db.dialect, b.String()), args...)
		if err != nil {
			return err
		}
	}
	return nil
}

// GetForUpdate reads the seat with SELECT ... FOR UPDATE, locking its row until the
// transaction in ctx ends. Outside TxRunner.InTx it fails.
func (r *SeatRepository) GetForUpdate(ctx context.Context, eventID string, number int) (*waiting.Seat, error) {
	if _, ok := r.db.transaction(ctx); !ok {
		return nil, errNoTransaction
	}
	conn, ctx, done := r.db.conn(ctx)
	defer done()
	seat := waiting.Seat{EventID: eventID, Number: number}
	if err := conn.QueryRowContext(ctx, r.getForUpdateSQL, eventID, number).Scan(&seat.Reserved); err != nil {
		return nil, translate(err, errorMeanings{op: "get seat for update", notFound: waiting.ErrSeatNotFound})
	}
	return &seat, nil
}

// MarkReserved marks the seat reserved.
func (r *SeatRepository) MarkReserved(ctx context.Context, eventID string, number int) error {
	updated, err := r.db.exec(ctx, errorMeanings{op: "reserve seat"}, r.reserveSQL, true, eventID, number)
	if err != nil {
		return err
	}
	if updated == 0 {
		return waiting.ErrSeatNotFound
	}
	return nil
}

// List returns up to limit seats of the event by number after `after`, by keyset on the
// primary key.
func (r *SeatRepository) List(ctx context.Context, eventID string, after, limit int) ([]waiting.Seat, error) {
	seats := []waiting.Seat{}
	if limit <= 0 {
		return seats, nil
	}
	err := r.db.query(ctx, errorMeanings{op: "list seats"}, r.listSQL, []any{eventID, after, limit}, func(rows *sql.Rows) error {
		s := waiting.Seat{EventID: eventID}
		if err := rows.Scan(&s.Number, &s.Reserved); err != nil {
			return err
		}
		seats = append(seats, s)
		return nil
	})
	return seats, err
}

// CountFree counts the event's unreserved seats.
func (r *SeatRepository) CountFree(ctx context.Context, eventID string) (int, error) {
	n := 0
	err := r.db.query(ctx, errorMeanings{op: "count free seats"}, r.freeSQL, []any{eventID, false}, func(rows *sql.Rows) error {
		return rows.Scan(&n)
	})
	return n, err
}

// ReservationRepository stores reservations; it implements ports.ReservationRepository.
type ReservationRepository struct {
	db                        *DB
	addSQL, findSQL, countSQL string
}

// NewReservationRepository returns the reservation repository of db.
func NewReservationRepository(db *DB) *ReservationRepository {
	return &ReservationRepository{
		db:       db,
		addSQL:   Bind(db.dialect, "INSERT INTO reservations (id, event_id, seat_no, user_id, reserved_at) VALUES (?, ?, ?, ?, ?)"),
		findSQL:  Bind(db.dialect, "SELECT id, user_id, reserved_at FROM reservations WHERE event_id = ? AND seat_no = ?"),
		countSQL: Bind(db.dialect, "SELECT COUNT(*) FROM reservations WHERE event_id = ?"),
	}
}

// Add inserts the reservation; UNIQUE(event_id, seat_no) refuses a second one for a seat with
// waiting.ErrSeatAlreadyReserved, and the foreign key a seat that does not exist with
// waiting.ErrSeatNotFound.
func (r *ReservationRepository) Add(ctx context.Context, res waiting.Reservation) error {
	_, err := r.db.exec(ctx, errorMeanings{
		op: "add reservation", notFound: waiting.ErrSeatNotFound, duplicate: waiting.ErrSeatAlreadyReserved,
	}, r.addSQL, res.ID, res.EventID, res.SeatNumber, res.UserID, res.ReservedAt.UTC())
	return err
}

// Find returns the reservation of the event's seat, read on the primary through the
// UNIQUE(event_id, seat_no) index; false when the seat has none.
func (r *ReservationRepository) Find(ctx context.Context, eventID string, seat int) (waiting.Reservation, bool, error) {
	res := waiting.Reservation{EventID: eventID, SeatNumber: seat}
	found, err := r.db.queryOne(ctx, errorMeanings{op: "find reservation"}, r.findSQL, []any{eventID, seat}, func(rows *sql.Rows) error {
		return rows.Scan(&res.ID, &res.UserID, &res.ReservedAt)
	})
	if err != nil || !found {
		return waiting.Reservation{}, false, err
	}
	res.ReservedAt = res.ReservedAt.UTC()
	return res, true, nil
}

// Count counts the event's reservations.
func (r *ReservationRepository) Count(ctx context.Context, eventID string) (int, error) {
	n := 0
	err := r.db.query(ctx, errorMeanings{op: "count reservations"}, r.countSQL, []any{eventID}, func(rows *sql.Rows) error {
		return rows.Scan(&n)
	})
	return n, err
}

// NewWaitingStores returns the event, seat and reservation repositories of db.
func NewWaitingStores(db *DB) ports.WaitingStores {
	return ports.WaitingStores{Events: NewEventRepository(db), Seats: NewSeatRepository(db), Reservations: NewReservationRepository(db)}
}
