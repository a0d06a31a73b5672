package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
)

// seat-herd: --users admitted users race for --capacity seats of one event, user i for seat
// i mod seats + 1, so each seat is wanted by users/seats users at once (the reservation's
// sold-out fast path, the seat's lock, the seat's row FOR UPDATE, UNIQUE per seat). Judged on
// the time until the last seat is taken, against the same reservation transactions issued
// directly through database/sql on an event of the same shape.

// newSeatHerd is --users users racing for --capacity seats.
func newSeatHerd(cfg config) (scenario, error) {
	if cfg.capacity < 1 || cfg.capacity > maxCapacity {
		return nil, fmt.Errorf("seat-herd: --capacity (the seats) must be 1..%d", maxCapacity)
	}
	if cfg.users > maxCapacity {
		return nil, fmt.Errorf("seat-herd: --users %d: an event admits at most %d at once", cfg.users, maxCapacity)
	}
	return &seatHerd{users: cfg.users, seats: cfg.capacity}, nil
}

type seatHerd struct {
	users, seats int

	// Set by prepare.
	eventID string
	headers []map[string]string // user i's Authorization and Entry-Token
}

var _ scenario = (*seatHerd)(nil)

func (s *seatHerd) shape() string {
	return fmt.Sprintf("%d admitted users → %d seats of 1 event", s.users, s.seats)
}

func (s *seatHerd) targets(gormdb.Dialect) []target {
	grants := min(s.seats, s.users)
	return []target{
		{measure: measureTimeToFill, grants: grants},
		{measure: measureFillRatio, grants: grants},
		{measure: measureP99, bound: atMost, limit: 300},
	}
}

func (s *seatHerd) seatOf(user int) int { return user%s.seats + 1 }

// prepare creates the event with a slot per user and admits every user (enter, claim), at the
// run's concurrency, keeping their entry tokens.
func (s *seatHerd) prepare(ctx context.Context, e *env) error {
	admin, err := e.adminToken()
	if err != nil {
		return fmt.Errorf("mint admin token: %w", err)
	}
	event, err := createByAdmin(ctx, e.api, 0, admin, "/admin/events", map[string]any{
		"name": "rushgate-load seats " + e.runID, "seats": s.seats, "slots": s.users, "mode": "pull", "tokenTtl": "1h",
	})
	if err != nil {
		return fmt.Errorf("create event: %w", err)
	}
	s.eventID = event.ID
	if s.headers, err = mintUsers(e, s.users); err != nil {
		return err
	}
	base := eventPath(s.eventID, "/queue")
	attempts, _ := runConcurrently(ctx, work{n: s.users, do: func(ctx context.Context, i int) attempt {
		if a, raw := e.api.post(ctx, i, base, s.headers[i], nil); a.status != http.StatusCreated {
			a.err = fmt.Errorf("enter: %d %w %s", a.status, a.err, snippet(raw))
			return a
		}
		a, raw := e.api.post(ctx, i, base+"/token", s.headers[i], nil)
		var token struct {
			Token string `json:"token"`
		}
		if a.status != http.StatusCreated || json.Unmarshal(raw, &token) != nil {
			a.err = fmt.Errorf("claim: %d %w %s", a.status, a.err, snippet(raw))
			return a
		}
		s.headers[i][rghttp.EntryTokenHeader] = token.Token
		return a
	}}, e.concurrency)
	for i, a := range attempts {
		if a.err != nil {
			return fmt.Errorf("admit user %d: %w", i, a.err)
		}
	}
	return nil
}

// run sends every user's reservation; a reservation succeeds with 201 only.
func (s *seatHerd) run(e *env) work {
	return work{n: s.users, do: func(ctx context.Context, i int) attempt {
		path := eventPath(s.eventID, fmt.Sprintf("/seats/%d/reservations", s.seatOf(i)))
		a, _ := e.api.post(ctx, i, path, s.headers[i], nil)
		a.ok = a.status == http.StatusCreated
		return a
	}}
}

const (
	seatReservationsSQL = `SELECT COUNT(*), COUNT(DISTINCT seat_no) FROM reservations WHERE event_id = ?`
	seatsReservedSQL    = `SELECT COUNT(*) FROM seats WHERE event_id = ? AND reserved = ?`
)

// invariant: one reservation per seat, reservations ≤ seats, every seat wanted is taken, the
// 201s are exactly the reservations, and every other answer is a 409.
func (s *seatHerd) invariant(ctx context.Context, e *env, attempts []attempt) (invariantResult, error) {
	var reservations, distinct, reserved int
	d := e.db.Dialect()
	if err := e.db.SQL().QueryRowContext(ctx, gormdb.Bind(d, seatReservationsSQL), s.eventID).Scan(&reservations, &distinct); err != nil {
		return invariantResult{}, fmt.Errorf("invariant: count reservations: %w", err)
	}
	if err := e.db.SQL().QueryRowContext(ctx, gormdb.Bind(d, seatsReservedSQL), s.eventID, true).Scan(&reserved); err != nil {
		return invariantResult{}, fmt.Errorf("invariant: count reserved seats: %w", err)
	}
	granted, refused, other := 0, 0, 0
	for _, a := range attempts {
		switch a.status {
		case http.StatusCreated:
			granted++
		case http.StatusConflict:
			refused++
		default:
			other++
		}
	}
	wanted := min(s.seats, s.users)
	res := invariantResult{rows: []invariantRow{
		{label: "reservations", value: reservations}, {label: "distinct seats reserved", value: distinct}, {label: "seats marked reserved", value: reserved},
		{label: "answered 201", value: granted}, {label: "answered 409", value: refused},
	}}
	if reservations != distinct || reservations != reserved || reservations > s.seats {
		res.violations = append(res.violations, fmt.Sprintf("%d reservations on %d distinct seats, %d seats marked reserved, %d seats", reservations, distinct, reserved, s.seats))
	}
	if granted != reservations {
		res.violations = append(res.violations, fmt.Sprintf("%d answers 201 but %d reservations stored", granted, reservations))
	}
	if reservations != wanted {
		res.violations = append(res.violations, fmt.Sprintf("%d of the %d seats wanted were reserved", reservations, wanted))
	}
	if other > 0 {
		res.violations = append(res.violations, fmt.Sprintf("%d answers neither 201 nor 409", other))
	}
	return res, nil
}

// The reservation transaction of the ceiling, the server's without HTTP, token, counter or lock.
const (
	insertEventSQL       = `INSERT INTO events (id, name, seats, slots, mode, token_ttl_ms, created_at) VALUES (?, ?, ?, ?, 'pull', 300000, ?)`
	insertSeatSQL        = `INSERT INTO seats (event_id, seat_no) VALUES (?, ?)`
	lockSeatSQL          = `SELECT reserved FROM seats WHERE event_id = ? AND seat_no = ? FOR UPDATE`
	insertReservationSQL = `INSERT INTO reservations (id, event_id, seat_no, user_id, reserved_at) VALUES (?, ?, ?, ?, ?)`
	markSeatSQL          = `UPDATE seats SET reserved = ? WHERE event_id = ? AND seat_no = ?`
)

// errSeatTaken means the ceiling's seat was reserved already: the transaction rolled back, as
// rushgate answers SEAT_ALREADY_RESERVED.
var errSeatTaken = errors.New("seat already reserved")

// ceiling creates an event of the same shape with SQL and returns the same reservations as bare
// transactions.
func (s *seatHerd) ceiling(ctx context.Context, e *env) (work, error) {
	d, db := e.db.Dialect(), e.db.SQL()
	eventID := uuid.NewString()
	if _, err := db.ExecContext(ctx, gormdb.Bind(d, insertEventSQL), eventID, "rushgate-load ceiling "+e.runID, s.seats, s.users, time.Now().UTC()); err != nil {
		return work{}, fmt.Errorf("ceiling: create event: %w", err)
	}
	for n := 1; n <= s.seats; n++ {
		if _, err := db.ExecContext(ctx, gormdb.Bind(d, insertSeatSQL), eventID, n); err != nil {
			return work{}, fmt.Errorf("ceiling: create seat: %w", err)
		}
	}
	lock, insert, mark := gormdb.Bind(d, lockSeatSQL), gormdb.Bind(d, insertReservationSQL), gormdb.Bind(d, markSeatSQL)
	return work{n: s.users, do: func(ctx context.Context, i int) attempt {
		ctx, cancel := context.WithTimeout(ctx, e.timeout)
		defer cancel()
		start := time.Now()
		err := reserveTx(ctx, db, lock, insert, mark, eventID, s.seatOf(i), fmt.Sprintf("ceiling-%s-%d", e.runID, i))
		a := attempt{latency: time.Since(start), ok: err == nil}
		if err != nil && !errors.Is(err, errSeatTaken) {
			a.err = err
		}
		return a
	}}, nil
}

// reserveTx reserves a seat as the server does: BEGIN, lock the seat's row, check it, INSERT
// the reservation, mark the seat, COMMIT.
func reserveTx(ctx context.Context, db *sql.DB, lock, insert, mark, eventID string, seat int, userID string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op once committed
	var reserved bool
	if err := tx.QueryRowContext(ctx, lock, eventID, seat).Scan(&reserved); err != nil {
		return fmt.Errorf("lock seat: %w", err)
	}
	if reserved {
		return errSeatTaken
	}
	if _, err := tx.ExecContext(ctx, insert, uuid.NewString(), eventID, seat, userID, time.Now().UTC()); err != nil {
		return fmt.Errorf("insert reservation: %w", err)
	}
	if _, err := tx.ExecContext(ctx, mark, true, eventID, seat); err != nil {
		return fmt.Errorf("mark seat: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
