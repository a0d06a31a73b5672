// Package waiting is the ticket waiting room: events with numbered seats, the queue
// users wait in before they may pick one, and the reservations they make. It imports the
// standard library and domain only.
package waiting

import (
	"strconv"
	"time"

	"github.com/rushgate/rushgate/domain"
)

// Bounds of an event.
const (
	MaxNameLength   = 200
	MaxSeats        = 100000
	DefaultTokenTTL = 5 * time.Minute
	MinTokenTTL     = time.Second
	MaxTokenTTL     = 24 * time.Hour
)

// Errors of the waiting room and the seats; the edge maps their codes to statuses.
var (
	ErrEventNotFound       = domain.NewError(domain.KindNotFound, "EVENT_NOT_FOUND", "event not found")
	ErrWrongMode           = domain.NewError(domain.KindConflict, "WRONG_ADMISSION_MODE", "this event admits users through the other admission mode")
	ErrNotInQueue          = domain.NewError(domain.KindNotFound, "NOT_IN_QUEUE", "the user is neither waiting in nor admitted to this event's queue")
	ErrNotReady            = domain.NewError(domain.KindConflict, "NOT_READY", "the user's turn has not come yet")
	ErrTokenRequired       = domain.NewError(domain.KindForbidden, "ENTRY_TOKEN_REQUIRED", "a valid entry token of this user and event is required in the Entry-Token header")
	ErrSeatNotFound        = domain.NewError(domain.KindNotFound, "SEAT_NOT_FOUND", "seat not found")
	ErrSoldOut             = domain.NewError(domain.KindConflict, "SOLD_OUT", "every seat of this event is reserved")
	ErrSeatBeingSelected   = domain.NewError(domain.KindConflict, "SEAT_BEING_SELECTED", "another user is selecting this seat; retry shortly")
	ErrSeatAlreadyReserved = domain.NewError(domain.KindConflict, "SEAT_ALREADY_RESERVED", "this seat is already reserved")
)

// Mode is how an event's waiting users learn that their turn has come.
type Mode string

// Admission modes.
const (
	ModePush Mode = "push" // a server-sent event stream
	ModePull Mode = "pull" // the client polls its status and claims its token
)

// Event is a sale of numbered seats, "1".."seats", behind a waiting room that admits at most
// slots users at a time, each for TokenTTL after their last sign of life.
type Event struct {
	id        string
	name      string
	seats     int
	slots     int
	mode      Mode
	tokenTTL  time.Duration
	createdAt time.Time
	prequeue  Prequeue // zero: none
}

// NewEvent validates and creates an event. slots 0 means one per seat, tokenTTL 0 the default.
func NewEvent(id, name string, seats, slots int, mode Mode, tokenTTL time.Duration, now time.Time) (*Event, error) {
	if err := domain.ValidateText("name", name, MaxNameLength); err != nil {
		return nil, err
	}
	if seats < 1 || seats > MaxSeats {
		return nil, domain.Invalid("seats", "must be between 1 and %d", MaxSeats)
	}
	if slots == 0 {
		slots = seats
	}
	if err := ValidateSlots(slots); err != nil {
		return nil, err
	}
	if mode != ModePush && mode != ModePull {
		return nil, domain.Invalid("mode", `must be "push" or "pull"`)
	}
	if tokenTTL == 0 {
		tokenTTL = DefaultTokenTTL
	}
	if tokenTTL < MinTokenTTL || tokenTTL > MaxTokenTTL {
		return nil, domain.Invalid("tokenTtl", "must be between %v and %v", MinTokenTTL, MaxTokenTTL)
	}
	return &Event{id: id, name: name, seats: seats, slots: slots, mode: mode, tokenTTL: tokenTTL, createdAt: now}, nil
}

// ValidateSlots accepts a number of concurrently admitted users: 1..MaxSeats.
func ValidateSlots(slots int) error {
	if slots < 1 || slots > MaxSeats {
		return domain.Invalid("slots", "must be between 1 and %d", MaxSeats)
	}
	return nil
}

// RebuildEvent restores an event from storage without re-validating; adapters only.
func RebuildEvent(id, name string, seats, slots int, mode Mode, tokenTTL time.Duration, createdAt time.Time) *Event {
	return &Event{id: id, name: name, seats: seats, slots: slots, mode: mode, tokenTTL: tokenTTL, createdAt: createdAt}
}

func (e *Event) ID() string              { return e.id }
func (e *Event) Name() string            { return e.name }
func (e *Event) Seats() int              { return e.seats }
func (e *Event) Slots() int              { return e.slots }
func (e *Event) Mode() Mode              { return e.mode }
func (e *Event) TokenTTL() time.Duration { return e.tokenTTL }
func (e *Event) CreatedAt() time.Time    { return e.createdAt }

// SetSlots changes how many users may be admitted at once.
func (e *Event) SetSlots(slots int) error {
	if err := ValidateSlots(slots); err != nil {
		return err
	}
	e.slots = slots
	return nil
}

// Seat is one numbered seat of an event; its id is its number as text ("1", "2", …).
type Seat struct {
	EventID  string
	Number   int
	Reserved bool
}

// ID is the seat's id as clients see it.
func (s Seat) ID() string { return strconv.Itoa(s.Number) }

// SeatNumber parses a seat id: the decimal number of a seat, without sign or leading zeros.
// Anything else names no seat.
func SeatNumber(id string) (int, error) {
	n, err := strconv.Atoi(id)
	if err != nil || n < 1 || n > MaxSeats || strconv.Itoa(n) != id {
		return 0, ErrSeatNotFound
	}
	return n, nil
}

// Reserve marks the seat reserved for a reservation made now, or fails with
// ErrSeatAlreadyReserved.
func (s *Seat) Reserve(id, userID string, now time.Time) (Reservation, error) {
	if s.Reserved {
		return Reservation{}, ErrSeatAlreadyReserved
	}
	s.Reserved = true
	return Reservation{ID: id, EventID: s.EventID, SeatNumber: s.Number, UserID: userID, ReservedAt: now}, nil
}

// Reservation is one user's seat; (EventID, SeatNumber) is unique.
type Reservation struct {
	ID         string
	EventID    string
	SeatNumber int
	UserID     string
	ReservedAt time.Time
}
