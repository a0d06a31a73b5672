// Package waiting holds the waiting-room use cases of SPEC §3: creating events with their
// seats, the pull-mode queue (enter, status, claim and return an entry token), the operators'
// view and slot changes, seat listing and seat reservation, and the reconciliation pass the
// background workers run. The queue core (ports.WaitingRoom) is shared with the push mode.
// It depends on ports only, so another Go service can embed it with its own adapters.
package waiting

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/ports"
)

// Defaults for Config's zero fields.
const (
	DefaultIdleTimeout  = 2 * time.Minute
	DefaultPollInterval = 2 * time.Second
)

// Config tunes the waiting-room use cases.
type Config struct {
	// IdleTimeout: a waiting user who has not polled for this long is dropped from the queue
	// (DefaultIdleTimeout when zero).
	IdleTimeout time.Duration
	// PollInterval is the status poll period the server asks clients for
	// (refreshIntervalSeconds; DefaultPollInterval when zero).
	PollInterval time.Duration
	// MaxBatch bounds how many reservations of one seat a lock hold serves in one transaction;
	// guard.DefaultMaxBatch when zero.
	MaxBatch int
}

// Observer receives each event's numbers after every reconciliation pass, for metrics. It must
// be cheap and safe for concurrent use.
type Observer interface {
	RoomObserved(eventID string, stats ports.RoomStats)
	// RoomsInUse ends each pass with the events it found in use: any other event has ended or
	// gone idle (nobody waiting or admitted), and its numbers can be forgotten.
	RoomsInUse(eventIDs []string)
}

// Deps are the ports and the guard the waiting-room use cases run on. Observer may be nil.
type Deps struct {
	Tx           ports.TxRunner
	Events       ports.EventRepository
	Seats        ports.SeatRepository
	Reservations ports.ReservationRepository
	Room         ports.WaitingRoom
	Guard        *guard.Guard
	Clock        ports.Clock
	IDs          ports.IDGenerator
	Observer     Observer
	// Tracer traces the push mode's promotions and deliveries; nil means tracing is off.
	Tracer ports.Tracer
}

// Service runs the waiting-room use cases.
type Service struct {
	d        Deps
	cfg      Config
	reserves *guard.Lane[reserveInput, ReservationView]
	// known caches what never changes about an event (mode, token TTL, seats): polls read it
	// on every call.
	known sync.Map // event id → *waiting.Event
	// loads makes a stampede on an event this instance has not read yet cost one read.
	loads singleflight.Group
	// soldOut holds the events the database said were sold out; reservations are never
	// cancelled, so it stays true.
	soldOut sync.Map // event id → struct{}
	// foreign holds the rooms in the shared index whose event this database does not know.
	foreign sync.Map // event id → struct{}
	rates   admissionRates
}

// NewService wires the waiting-room use cases to their ports.
func NewService(d Deps, cfg Config) *Service {
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if d.Tracer == nil {
		d.Tracer = ports.NoTracer{}
	}
	s := &Service{d: d, cfg: cfg, rates: admissionRates{byEvent: make(map[string]*waiting.AdmissionRate)}}
	s.reserves = guard.NewLane(d.Guard, guard.LaneConfig{
		MaxBatch: cfg.MaxBatch,
		LockWait: SeatLockWait,
		LockTTL:  SeatLockTTL,
		Busy:     waiting.ErrSeatBeingSelected,
	}, s.reserveBatch)
	return s
}

// EventView is an event as clients see it.
type EventView struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Seats     int       `json:"seats"`
	Slots     int       `json:"slots"`
	Mode      string    `json:"mode"`
	TokenTTL  string    `json:"tokenTtl"`
	CreatedAt time.Time `json:"createdAt"`
}

func viewOf(e *waiting.Event) EventView {
	return EventView{ID: e.ID(), Name: e.Name(), Seats: e.Seats(), Slots: e.Slots(), Mode: string(e.Mode()),
		TokenTTL: e.TokenTTL().String(), CreatedAt: e.CreatedAt()}
}

// CreateEventCommand creates an event; Slots 0 means one per seat, TokenTTL "" the default.
type CreateEventCommand struct {
	Name     string
	Seats    int
	Slots    int
	Mode     string
	TokenTTL string
}

// CreateEvent stores the event and its seats in one transaction, then opens its waiting room.
// A room that fails to open (Redis down) is opened by the first queue call instead.
func (s *Service) CreateEvent(ctx context.Context, cmd CreateEventCommand) (EventView, error) {
	var ttl time.Duration
	if cmd.TokenTTL != "" {
		parsed, err := time.ParseDuration(cmd.TokenTTL)
		if err != nil {
			return EventView{}, domain.Invalid("tokenTtl", "must be a duration such as 5m")
		}
		if parsed <= 0 {
			return EventView{}, domain.Invalid("tokenTtl", "must be between %v and %v", waiting.MinTokenTTL, waiting.MaxTokenTTL)
		}
		ttl = parsed
	}
	if cmd.Slots < 0 {
		return EventView{}, waiting.ValidateSlots(cmd.Slots)
	}
	e, err := waiting.NewEvent(s.d.IDs.NewID(), cmd.Name, cmd.Seats, cmd.Slots, waiting.Mode(cmd.Mode), ttl, s.d.Clock.Now())
	if err != nil {
		return EventView{}, err
	}
	err = s.d.Tx.InTx(ctx, func(ctx context.Context) error {
		if err := s.d.Events.Create(ctx, e); err != nil {
			return fmt.Errorf("create event: %w", err)
		}
		if err := s.d.Seats.Create(ctx, e.ID(), e.Seats()); err != nil {
			return fmt.Errorf("create seats: %w", err)
		}
		return nil
	})
	if err != nil {
		return EventView{}, err
	}
	_ = s.d.Room.Open(ctx, e.ID(), e.Slots(), e.Seats())
	return viewOf(e), nil
}

// SetSlots changes a live event's slots (SPEC §7 PATCH): the database first, then the room,
// whose remaining slots become max(0, slots − tokens alive) atomically.
func (s *Service) SetSlots(ctx context.Context, eventID string, slots int) (EventView, error) {
	if err := domain.ValidateUUID("eventId", eventID); err != nil {
		return EventView{}, err
	}
	if err := waiting.ValidateSlots(slots); err != nil {
		return EventView{}, err
	}
	if err := s.d.Events.SaveSlots(ctx, eventID, slots); err != nil {
		return EventView{}, err
	}
	e, err := s.d.Events.Get(ctx, eventID)
	if err != nil {
		return EventView{}, err
	}
	err = s.inRoom(ctx, e, func() error {
		_, err := s.d.Room.SetSlots(ctx, eventID, slots)
		return err
	})
	if err != nil {
		return EventView{}, fmt.Errorf("set slots: %w", err)
	}
	return viewOf(e), nil
}

// event returns the event, from the cache after the first read, or waiting.ErrEventNotFound.
// Its slots may be stale; mode, token TTL and seats never change.
func (s *Service) event(ctx context.Context, eventID string) (*waiting.Event, error) {
	if err := domain.ValidateUUID("eventId", eventID); err != nil {
		return nil, err
	}
	if e, ok := s.known.Load(eventID); ok {
		return e.(*waiting.Event), nil
	}
	loaded, err, _ := s.loads.Do(eventID, func() (any, error) {
		e, err := s.d.Events.Get(ctx, eventID)
		if err != nil {
			return nil, err
		}
		s.known.Store(eventID, e)
		return e, nil
	})
	if err != nil {
		return nil, err
	}
	return loaded.(*waiting.Event), nil
}

// pullEvent is event for a pull-mode route: a push event is waiting.ErrWrongMode.
func (s *Service) pullEvent(ctx context.Context, eventID, userID string) (*waiting.Event, error) {
	if err := domain.ValidateUserID("userId", userID); err != nil {
		return nil, err
	}
	e, err := s.event(ctx, eventID)
	if err != nil {
		return nil, err
	}
	if e.Mode() != waiting.ModePull {
		return nil, waiting.ErrWrongMode
	}
	return e, nil
}

// inRoom runs fn on the event's room; when the store has no room for it (never opened, or lost
// in a Redis flush) it opens it from the database — current slots, and the seat counter at
// the database's count of free seats — and runs fn again.
func (s *Service) inRoom(ctx context.Context, e *waiting.Event, fn func() error) error {
	err := fn()
	if !errors.Is(err, ports.ErrRoomNotOpen) {
		return err
	}
	current, err := s.d.Events.Get(ctx, e.ID())
	if err != nil {
		return err
	}
	free, err := s.d.Seats.CountFree(ctx, e.ID())
	if err != nil {
		return err
	}
	if err := s.d.Room.Open(ctx, e.ID(), current.Slots(), free); err != nil {
		return err
	}
	return fn()
}

// Queue statuses (SPEC §3).
const (
	StatusWaiting = "waiting"
	StatusReady   = "ready"
	StatusEntered = "entered"
)

// StatusView answers entering and polling. EstimatedWaitSeconds is whole seconds within
// waiting.MaxEstimatedWait, 0 with nobody to be admitted first, and null while this instance has
// seen no admission within waiting.RateWindow to estimate from.
type StatusView struct {
	Status                 string `json:"status"`
	Rank                   int    `json:"rank"`
	AheadCount             int    `json:"aheadCount"`
	RefreshIntervalSeconds int    `json:"refreshIntervalSeconds"`
	EstimatedWaitSeconds   *int   `json:"estimatedWaitSeconds"`
}

// statusOf describes a place: aheadCount = max(0, rank − remaining + 1), the admissions that
// must happen before the user is ready; both are 0 once entered.
func (s *Service) statusOf(eventID string, p ports.QueuePlace) StatusView {
	v := StatusView{Status: StatusEntered, RefreshIntervalSeconds: int(math.Ceil(s.cfg.PollInterval.Seconds()))}
	if !p.Admitted {
		v.Rank, v.AheadCount = p.Rank, max(0, p.Rank-p.RemainingSlots+1)
		v.Status = StatusWaiting
		if v.AheadCount == 0 {
			v.Status = StatusReady
		}
	}
	v.EstimatedWaitSeconds = s.rates.estimate(eventID, v.AheadCount, s.d.Clock.Now())
	return v
}

// Enter queues the user (SPEC §3 pull). created is false when the user was already waiting
// (same place) or admitted.
func (s *Service) Enter(ctx context.Context, eventID, userID string) (view StatusView, created bool, err error) {
	e, err := s.pullEvent(ctx, eventID, userID)
	if err != nil {
		return StatusView{}, false, err
	}
	var p ports.QueuePlace
	err = s.inRoom(ctx, e, func() error {
		p, err = s.d.Room.Enter(ctx, eventID, userID)
		return err
	})
	if err != nil {
		return StatusView{}, false, fmt.Errorf("enter queue: %w", err)
	}
	return s.statusOf(eventID, p), p.Created, nil
}

// Status answers the user's place and refreshes an admitted user's token, or
// waiting.ErrNotInQueue.
func (s *Service) Status(ctx context.Context, eventID, userID string) (StatusView, error) {
	e, err := s.pullEvent(ctx, eventID, userID)
	if err != nil {
		return StatusView{}, err
	}
	var p ports.QueuePlace
	err = s.inRoom(ctx, e, func() error {
		p, err = s.d.Room.Position(ctx, eventID, userID, e.TokenTTL())
		return err
	})
	if errors.Is(err, ports.ErrNotQueued) {
		return StatusView{}, waiting.ErrNotInQueue
	}
	if err != nil {
		return StatusView{}, fmt.Errorf("queue status: %w", err)
	}
	return s.statusOf(eventID, p), nil
}

// TokenView is an entry token.
type TokenView struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// Claim admits the user if their turn has come (SPEC §3 pull): created is false when the user
// already held the token (same token, expiry extended). Fails with waiting.ErrNotReady carrying
// rank and aheadCount, or waiting.ErrNotInQueue.
func (s *Service) Claim(ctx context.Context, eventID, userID string) (view TokenView, created bool, err error) {
	e, err := s.pullEvent(ctx, eventID, userID)
	if err != nil {
		return TokenView{}, false, err
	}
	var res ports.ClaimResult
	err = s.inRoom(ctx, e, func() error {
		res, err = s.d.Room.Claim(ctx, eventID, userID, rand.Text(), e.TokenTTL())
		return err
	})
	if errors.Is(err, ports.ErrNotQueued) {
		return TokenView{}, false, waiting.ErrNotInQueue
	}
	if err != nil {
		return TokenView{}, false, fmt.Errorf("claim token: %w", err)
	}
	if !res.Claimed {
		notReady := *waiting.ErrNotReady
		v := s.statusOf(eventID, res.Place)
		notReady.Details = map[string]any{"rank": v.Rank, "aheadCount": v.AheadCount}
		return TokenView{}, false, &notReady
	}
	return TokenView{Token: res.Token, ExpiresAt: res.ExpiresAt}, res.Created, nil
}

// Return gives the user's slot back and deletes the token; a user holding none is not an error.
func (s *Service) Return(ctx context.Context, eventID, userID string) error {
	e, err := s.pullEvent(ctx, eventID, userID)
	if err != nil {
		return err
	}
	err = s.inRoom(ctx, e, func() error {
		_, err := s.d.Room.Release(ctx, eventID, userID)
		return err
	})
	if err != nil {
		return fmt.Errorf("return token: %w", err)
	}
	return nil
}

// QueueView is the operators' view of an event's queue (SPEC §7), with the admission rate this
// instance measured over waiting.RateWindow (admissions per second, null before two
// reconciliation passes within it).
type QueueView struct {
	Waiting           int      `json:"waiting"`
	Admitted          int      `json:"admitted"`
	Slots             int      `json:"slots"`
	RemainingSlots    int      `json:"remainingSlots"`
	RemainingSeats    int      `json:"remainingSeats"`
	Claims            int64    `json:"claims"`
	ExpiredReconciled int64    `json:"expiredReconciled"`
	DroppedIdle       int64    `json:"droppedIdle"`
	Returned          int64    `json:"returned"`
	AdmissionRate     *float64 `json:"admissionRate"`
	// Connections counts push users held by an SSE connection, or in their reconnect grace,
	// across every broker.
	Connections int `json:"connections"`
}

// Queue answers the operators' view; remaining seats are the database's count.
func (s *Service) Queue(ctx context.Context, eventID string) (QueueView, error) {
	e, err := s.event(ctx, eventID)
	if err != nil {
		return QueueView{}, err
	}
	var st ports.RoomStats
	err = s.inRoom(ctx, e, func() error {
		st, err = s.d.Room.Stats(ctx, eventID)
		return err
	})
	if err != nil {
		return QueueView{}, fmt.Errorf("queue stats: %w", err)
	}
	free, err := s.d.Seats.CountFree(ctx, eventID)
	if err != nil {
		return QueueView{}, fmt.Errorf("count free seats: %w", err)
	}
	return QueueView{Waiting: st.Waiting, Admitted: st.Admitted, Slots: st.Slots, RemainingSlots: st.RemainingSlots,
		RemainingSeats: free, Claims: st.Claims, ExpiredReconciled: st.Expired, DroppedIdle: st.Dropped,
		Returned: st.Released, AdmissionRate: s.rates.perSecond(eventID, s.d.Clock.Now()), Connections: st.Connected}, nil
}

// SeatView is one seat as clients see it.
type SeatView struct {
	ID       string `json:"id"`
	Reserved bool   `json:"reserved"`
}

// SeatPage is one page of seats; NextCursor is nil on the last page.
type SeatPage struct {
	Items      []SeatView `json:"items"`
	NextCursor *string    `json:"nextCursor"`
}

// ListSeats pages through an event's seats by number; the cursor is the last seat id of the
// previous page. limit 0 means domain.DefaultPageLimit.
func (s *Service) ListSeats(ctx context.Context, eventID string, limit int, cursor string) (SeatPage, error) {
	limit, err := domain.PageLimit(limit)
	if err != nil {
		return SeatPage{}, err
	}
	after := 0
	if cursor != "" {
		n, err := waiting.SeatNumber(cursor)
		if err != nil {
			return SeatPage{}, domain.Invalid("cursor", "is not a cursor this server issued")
		}
		after = n
	}
	if _, err := s.event(ctx, eventID); err != nil {
		return SeatPage{}, err
	}
	seats, err := s.d.Seats.List(ctx, eventID, after, limit+1)
	if err != nil {
		return SeatPage{}, fmt.Errorf("list seats: %w", err)
	}
	page := SeatPage{Items: make([]SeatView, 0, min(len(seats), limit))}
	for i, seat := range seats {
		if i == limit {
			next := strconv.Itoa(seats[i-1].Number)
			page.NextCursor = &next
			break
		}
		page.Items = append(page.Items, SeatView{ID: seat.ID(), Reserved: seat.Reserved})
	}
	return page, nil
}
