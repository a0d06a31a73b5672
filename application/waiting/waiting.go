// Package waiting holds the waiting-room use cases: creating events with their
// seats, the pull-mode queue (enter, status, claim and return an entry token), the operators'
// view and slot changes, seat listing and seat reservation, and the reconciliation pass the
// background workers run. The push mode's Broker and Dispatcher (push.go) are types of their
// own on the same queue, each with its own Deps; what they share with Service is explicit:
// eventRooms (each holds one) and the AdmissionRates the reconciliation measures.
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

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/ports"
)

// Defaults for Config's zero fields.
const (
	DefaultIdleTimeout  = 2 * time.Minute
	DefaultPollInterval = 2 * time.Second
	DefaultRetention    = 7 * 24 * time.Hour
)

// signOfLifeStep is how old a waiting user's recorded sign of life gets before a poll records a
// new one: an eighth of the idle timeout. Most polls then write nothing (at the defaults, one in
// about eight records a sign), and an idle user is dropped between IdleTimeout and
// IdleTimeout+signOfLifeStep after the last poll, never before.
func (c Config) signOfLifeStep() time.Duration { return c.IdleTimeout / 8 }

// Config tunes the waiting-room use cases.
type Config struct {
	// IdleTimeout: a waiting user who has not polled for this long is dropped from the queue
	// (DefaultIdleTimeout when zero), within signOfLifeStep of it.
	IdleTimeout time.Duration
	// PollInterval is the status poll period the server asks clients for
	// (refreshIntervalSeconds; DefaultPollInterval when zero).
	PollInterval time.Duration
	// Retention is how long the store keeps a room the reconciliation found empty (nobody
	// waiting, pre-queued or admitted) before forgetting it (ports.RoomReconciler); a room used
	// again meanwhile is kept, and one forgotten is opened again from the database when its
	// event is next used. DefaultRetention when zero.
	Retention time.Duration
	// MaxBatch bounds how many reservations of one seat a lock hold serves in one transaction;
	// guard.DefaultMaxBatch when zero.
	MaxBatch int
	// Timeout, the database's timeout, bounds a reservation's database work in all: its reads
	// before the lock (the event, on its first reservation here; the event and its free seats
	// again, to open a room the store lost; the free seats, when the seat counter is at 0), then
	// its batch's transaction, but not its wait for the lock (guard.Budget). It bounds the
	// database work of a pull queue call, the operators' view, a slot change, the public event
	// view and the seat list the same way, the reads that open a lost room included, and each
	// event's in a reconciliation pass (its read, the free seats' count that repairs the seat
	// counter, the reads that open a lost room). Zero: no bound of its own.
	Timeout time.Duration
}

// Observer receives each event's numbers after every reconciliation pass, for metrics. It must
// be cheap and safe for concurrent use.
type Observer interface {
	RoomObserved(eventID string, stats ports.RoomStats)
	// WaitErrorsObserved: admissions of the event had these wait errors (actual − predicted),
	// each reported by one pass of one instance.
	WaitErrorsObserved(eventID string, errs []time.Duration)
	// RoomsInUse ends each pass with the events it found in use: any other event has ended or
	// gone idle (nobody waiting or admitted), and its numbers can be forgotten.
	RoomsInUse(eventIDs []string)
	// PrequeueOpened: this instance opened the event's pre-queue (one call opens it, whatever
	// the instances), late after its opensAt.
	PrequeueOpened(eventID string, late time.Duration)
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
	// Rates are where the reconciliation pass records the admission rates it measures, which
	// the estimates read; give the push Broker the same ones. Nil: rates of this Service alone.
	Rates    *AdmissionRates
	Observer Observer
	// Sleeper waits for a pre-queue's opensAt on Clock, so the pre-queue opens then rather than
	// at the next reconciliation pass. Nil: the pass opens it.
	Sleeper ports.Sleeper
}

// Service runs the waiting-room use cases.
type Service struct {
	d        Deps
	cfg      Config
	reserves *guard.Lane[reserveInput, ReservationView]
	rooms    *eventRooms
	// soldOut holds the events the database said were sold out; reservations are never
	// cancelled, so it stays true.
	soldOut sync.Map // event id → struct{}
	// foreign holds the rooms in the shared index whose event this database does not know.
	foreign sync.Map // event id → struct{}
	// opened holds the events whose pre-queue the store opened; opening is final, unless Redis
	// comes back without it (redoLostWrites).
	opened sync.Map // event id → struct{}
	// placing holds the events whose pre-queue this instance is opening now.
	placing  sync.Map // event id → struct{}
	openings *openingTimers
	// predicted holds the users whose first wait estimate this instance sent to the store, so
	// later polls cost no write (the store keeps the first of any instance's).
	predicted *predictions
}

// NewService wires the waiting-room use cases to their ports.
func NewService(d Deps, cfg Config) *Service {
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if d.Rates == nil {
		d.Rates = NewAdmissionRates()
	}
	s := &Service{d: d, cfg: cfg, rooms: newEventRooms(d.Events, d.Seats, d.Room, d.Clock), openings: newOpeningTimers(),
		predicted: newPredictions()}
	s.reserves = guard.NewLane(d.Guard, guard.LaneConfig{
		MaxBatch: cfg.MaxBatch,
		LockWait: SeatLockWait,
		LockTTL:  SeatLockTTL,
		Busy:     waiting.ErrSeatBeingSelected,
	}, s.reserveBatch)
	return s
}

// EventView is an event as operators see it; a pre-queue's OpensAt, Prequeue and SeedHash
// are zero without one.
type EventView struct {
	ID        string
	Name      string
	Seats     int
	Slots     int
	Mode      string
	TokenTTL  string
	CreatedAt time.Time
	OpensAt   *time.Time
	Prequeue  string
	SeedHash  string
}

func viewOf(e *waiting.Event) EventView {
	v := EventView{ID: e.ID(), Name: e.Name(), Seats: e.Seats(), Slots: e.Slots(), Mode: string(e.Mode()),
		TokenTTL: e.TokenTTL().String(), CreatedAt: e.CreatedAt()}
	if p, ok := e.Prequeue(); ok {
		v.OpensAt, v.Prequeue, v.SeedHash = &p.OpensAt, string(p.Order), p.Seed.Hash()
	}
	return v
}

// CreateEventCommand creates an event; Slots 0 means one per seat, TokenTTL "" the default.
// OpensAt (RFC 3339), when given, gives the event a pre-queue placed in Prequeue order
// ("shuffle" when "").
type CreateEventCommand struct {
	Name     string
	Seats    int
	Slots    int
	Mode     string
	TokenTTL string
	OpensAt  string
	Prequeue string
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
	if err := s.schedulePrequeue(e, cmd); err != nil {
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
	_ = openRoom(ctx, s.d.Room, e, e.Slots(), e.Seats(), s.d.Clock.Now())
	s.armOpening(e)
	return viewOf(e), nil
}

// SetSlots changes a live event's slots: the database first, then the room,
// whose remaining slots become max(0, slots − tokens alive) atomically. Its database work (the
// write, the event read back, the reads that open a lost room) shares one Config.Timeout.
func (s *Service) SetSlots(ctx context.Context, eventID string, slots int) (EventView, error) {
	if err := domain.ValidateUUID("eventId", eventID); err != nil {
		return EventView{}, err
	}
	if err := waiting.ValidateSlots(slots); err != nil {
		return EventView{}, err
	}
	budget := guard.NewBudget(s.cfg.Timeout)
	e, err := s.saveSlots(ctx, budget, eventID, slots)
	if err != nil {
		return EventView{}, err
	}
	err = s.rooms.inRoom(ctx, budget, e.ID(), func() error {
		_, err := s.d.Room.SetSlots(ctx, eventID, slots)
		return err
	})
	if err != nil {
		return EventView{}, fmt.Errorf("set slots: %w", err)
	}
	return viewOf(e), nil
}

// saveSlots writes the event's slots and reads it back from the database, spending budget.
func (s *Service) saveSlots(ctx context.Context, budget *guard.Budget, eventID string, slots int) (*waiting.Event, error) {
	ctx, spent := budget.Spend(ctx)
	defer spent()
	if err := s.d.Events.SaveSlots(ctx, eventID, slots); err != nil {
		return nil, err
	}
	return s.d.Events.Get(ctx, eventID)
}

// pullEvent is event for a pull-mode route, whose read spends budget: a push event is
// waiting.ErrWrongMode.
func (s *Service) pullEvent(ctx context.Context, budget *guard.Budget, eventID, userID string) (*waiting.Event, error) {
	if err := domain.ValidateUserID("userId", userID); err != nil {
		return nil, err
	}
	e, err := s.rooms.event(ctx, budget, eventID)
	if err != nil {
		return nil, err
	}
	if e.Mode() != waiting.ModePull {
		return nil, waiting.ErrWrongMode
	}
	return e, nil
}

// Queue statuses.
const (
	StatusWaiting  = "waiting"
	StatusReady    = "ready"
	StatusEntered  = "entered"
	StatusPrequeue = "prequeue"
	// StatusSoldOut answers anyone polling a sold-out event, with nothing else: there is no
	// place left to tell.
	StatusSoldOut = "soldout"
)

// StatusView answers entering and polling. EstimatedWaitSeconds is whole seconds within
// waiting.MaxEstimatedWait, 0 with nobody to be admitted first, and null while this instance has
// seen no admission within waiting.RateWindow to estimate from. Prequeue is set, and Rank and
// AheadCount mean nothing, while the user waits in a pre-queue (StatusPrequeue).
type StatusView struct {
	Status                 string
	Rank                   int
	AheadCount             int
	RefreshIntervalSeconds int
	EstimatedWaitSeconds   *int
	Prequeue               *PrequeueView
}

// statusOf describes a place: rank and aheadCount while waiting, both 0 once entered; the
// pre-queue's opening and commitment while it is not placed.
func (s *Service) statusOf(e *waiting.Event, p ports.QueuePlace) StatusView {
	eventID := e.ID()
	v := StatusView{Status: StatusEntered, RefreshIntervalSeconds: int(math.Ceil(s.cfg.PollInterval.Seconds()))}
	if p.Prequeue {
		v.Status, v.Prequeue = StatusPrequeue, prequeueViewOf(e)
		return v
	}
	if !p.Admitted {
		v.Rank, v.AheadCount = p.Rank, aheadCount(p.Rank, p.RemainingSlots)
		v.Status = StatusWaiting
		if v.AheadCount == 0 {
			v.Status = StatusReady
		}
	}
	v.EstimatedWaitSeconds = s.d.Rates.estimate(eventID, v.AheadCount, s.d.Clock.Now())
	return v
}

// aheadCount is how many admissions must happen before a waiting user at rank is ready, with
// remaining slots free: max(0, rank − remaining + 1).
func aheadCount(rank, remaining int) int { return max(0, rank-remaining+1) }

// Enter queues the user (pull mode). created is false when the user was already waiting
// (same place) or admitted. A sold-out event is waiting.ErrSoldOut.
func (s *Service) Enter(ctx context.Context, eventID, userID string) (view StatusView, created bool, err error) {
	budget := guard.NewBudget(s.cfg.Timeout)
	e, err := s.pullEvent(ctx, budget, eventID, userID)
	if err != nil {
		return StatusView{}, false, err
	}
	var p ports.QueuePlace
	err = s.rooms.inRoom(ctx, budget, e.ID(), func() error {
		p, err = s.d.Room.Enter(ctx, eventID, userID)
		return err
	})
	if errors.Is(err, ports.ErrSoldOut) {
		return StatusView{}, false, waiting.ErrSoldOut
	}
	if err != nil {
		return StatusView{}, false, fmt.Errorf("enter queue: %w", err)
	}
	if p.Created {
		// A new wait: a prediction remembered from an earlier one (the user left or was dropped,
		// maybe through another instance) is gone from the store with it.
		s.predicted.forget(eventID, userID)
	}
	v := s.statusOf(e, p)
	s.predictFirst(ctx, eventID, userID, p, v)
	return v, p.Created, nil
}

// Status answers the user's place and refreshes an admitted user's token, or
// waiting.ErrNotInQueue; anyone polling a sold-out event hears StatusSoldOut.
func (s *Service) Status(ctx context.Context, eventID, userID string) (StatusView, error) {
	budget := guard.NewBudget(s.cfg.Timeout)
	e, err := s.pullEvent(ctx, budget, eventID, userID)
	if err != nil {
		return StatusView{}, err
	}
	var p ports.QueuePlace
	err = s.rooms.inRoom(ctx, budget, e.ID(), func() error {
		p, err = s.d.Room.Position(ctx, eventID, userID, e.TokenTTL(), s.cfg.signOfLifeStep())
		return err
	})
	if errors.Is(err, ports.ErrNotQueued) {
		s.predicted.forget(eventID, userID)
		return StatusView{}, waiting.ErrNotInQueue
	}
	if errors.Is(err, ports.ErrSoldOut) {
		s.predicted.forgetEvent(eventID)
		return StatusView{Status: StatusSoldOut}, nil
	}
	if err != nil {
		return StatusView{}, fmt.Errorf("queue status: %w", err)
	}
	v := s.statusOf(e, p)
	s.predictFirst(ctx, eventID, userID, p, v)
	return v, nil
}

// predictFirst records the estimate a waiting user is given, by an entry or a poll, as their
// prediction (for the wait accuracy: the first non-null one) in the store, once per user and
// instance, so a user's later polls cost no write; one that fails is tried on the next poll,
// and the answer does not fail with it.
func (s *Service) predictFirst(ctx context.Context, eventID, userID string, p ports.QueuePlace, v StatusView) {
	if p.Admitted || v.EstimatedWaitSeconds == nil || !s.predicted.add(eventID, userID) {
		return
	}
	if err := s.d.Room.Predict(ctx, eventID, map[string]int{userID: *v.EstimatedWaitSeconds}); err != nil {
		s.predicted.forget(eventID, userID)
	}
}

// TokenView is an entry token.
type TokenView struct {
	Token     string
	ExpiresAt time.Time
}

// Claim admits the user if their turn has come (pull mode): created is false when the user
// already held the token (same token, expiry extended). Fails with waiting.ErrNotReady carrying
// rank and aheadCount, waiting.ErrNotInQueue, or waiting.ErrSoldOut.
func (s *Service) Claim(ctx context.Context, eventID, userID string) (view TokenView, created bool, err error) {
	budget := guard.NewBudget(s.cfg.Timeout)
	e, err := s.pullEvent(ctx, budget, eventID, userID)
	if err != nil {
		return TokenView{}, false, err
	}
	var res ports.ClaimResult
	err = s.rooms.inRoom(ctx, budget, e.ID(), func() error {
		res, err = s.d.Room.Claim(ctx, eventID, userID, rand.Text(), e.TokenTTL())
		return err
	})
	if errors.Is(err, ports.ErrNotQueued) {
		return TokenView{}, false, waiting.ErrNotInQueue
	}
	if errors.Is(err, ports.ErrSoldOut) {
		return TokenView{}, false, waiting.ErrSoldOut
	}
	if err != nil {
		return TokenView{}, false, fmt.Errorf("claim token: %w", err)
	}
	if !res.Claimed {
		notReady := *waiting.ErrNotReady
		v := s.statusOf(e, res.Place)
		notReady.Details = map[string]any{"rank": v.Rank, "aheadCount": v.AheadCount}
		if v.Prequeue != nil { // no rank exists yet
			notReady.Details = map[string]any{"rank": nil, "aheadCount": nil}
		}
		return TokenView{}, false, &notReady
	}
	// Admitted: a later wait (after leaving and entering again) gets a first estimate anew.
	s.predicted.forget(eventID, userID)
	return tokenOf(res), res.Created, nil
}

// tokenOf is the token a claim or an issue answered.
func tokenOf(res ports.ClaimResult) TokenView {
	return TokenView{Token: res.Token, ExpiresAt: res.ExpiresAt}
}

// Return gives the user's slot back and deletes the token; a user holding none is not an error.
func (s *Service) Return(ctx context.Context, eventID, userID string) error {
	budget := guard.NewBudget(s.cfg.Timeout)
	e, err := s.pullEvent(ctx, budget, eventID, userID)
	if err != nil {
		return err
	}
	err = s.rooms.inRoom(ctx, budget, e.ID(), func() error {
		_, err := s.d.Room.Release(ctx, eventID, userID)
		return err
	})
	if err != nil {
		return fmt.Errorf("return token: %w", err)
	}
	return nil
}

// Leave takes a waiting or pre-queued user out of a pull queue: everyone behind moves
// up, and the user's wait estimate is forgotten. A user not in the line, admitted included, is
// not an error.
func (s *Service) Leave(ctx context.Context, eventID, userID string) error {
	budget := guard.NewBudget(s.cfg.Timeout)
	e, err := s.pullEvent(ctx, budget, eventID, userID)
	if err != nil {
		return err
	}
	err = s.rooms.inRoom(ctx, budget, e.ID(), func() error {
		return s.d.Room.Leave(ctx, eventID, userID)
	})
	if err != nil {
		return fmt.Errorf("leave queue: %w", err)
	}
	s.predicted.forget(eventID, userID)
	return nil
}

// QueueView is the operators' view of an event's queue, with the admission rate this
// instance measured over waiting.RateWindow (admissions per second, null before two
// reconciliation passes within it).
type QueueView struct {
	// Waiting counts everyone in line and not admitted, pre-queued users included.
	Waiting int
	// Prequeued counts those of Waiting in a pre-queue that has not opened yet.
	Prequeued         int
	Admitted          int
	Slots             int
	RemainingSlots    int
	RemainingSeats    int
	Claims            int64
	ExpiredReconciled int64
	DroppedIdle       int64
	Returned          int64
	AdmissionRate     *float64
	WaitAccuracy      waiting.WaitAccuracy
	// Connections counts push users held by an SSE connection, or in their reconnect grace,
	// across every broker.
	Connections int
	SoldOut     bool
}

// Queue answers the operators' view; remaining seats are the database's count. Its database
// reads (the event's, those that open a lost room, the count) share one Config.Timeout.
func (s *Service) Queue(ctx context.Context, eventID string) (QueueView, error) {
	budget := guard.NewBudget(s.cfg.Timeout)
	e, err := s.rooms.event(ctx, budget, eventID)
	if err != nil {
		return QueueView{}, err
	}
	var st ports.RoomStats
	err = s.rooms.inRoom(ctx, budget, e.ID(), func() error {
		st, err = s.d.Room.Stats(ctx, eventID)
		return err
	})
	if err != nil {
		return QueueView{}, fmt.Errorf("queue stats: %w", err)
	}
	readCtx, spent := budget.Spend(ports.AllowStale(ctx))
	free, err := s.d.Seats.CountFree(readCtx, eventID)
	spent()
	if err != nil {
		return QueueView{}, fmt.Errorf("count free seats: %w", err)
	}
	waits, err := s.d.Room.WaitErrors(ctx, eventID)
	if err != nil {
		return QueueView{}, fmt.Errorf("read wait errors: %w", err)
	}
	return QueueView{Waiting: st.InLine(), Prequeued: st.Prequeued, Admitted: st.Admitted, Slots: st.Slots, RemainingSlots: st.RemainingSlots,
		RemainingSeats: free, Claims: st.Claims, ExpiredReconciled: st.Expired, DroppedIdle: st.Dropped,
		Returned: st.Released, AdmissionRate: s.d.Rates.perSecond(eventID, s.d.Clock.Now()), Connections: st.Connected,
		WaitAccuracy: waiting.SummarizeWaitErrors(waits),
		SoldOut:      st.SoldOut}, nil
}

// SeatView is one seat as clients see it.
type SeatView struct {
	ID       string
	Reserved bool
}

// SeatPage is one page of seats; NextCursor is nil on the last page.
type SeatPage struct {
	Items      []SeatView
	NextCursor *string
}

// ListSeats pages through an event's seats by number; the cursor is the last seat id of the
// previous page. limit 0 means domain.DefaultPageLimit. Its database reads (the event's, the
// page's) share one Config.Timeout.
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
	budget := guard.NewBudget(s.cfg.Timeout)
	if _, err := s.rooms.event(ctx, budget, eventID); err != nil {
		return SeatPage{}, err
	}
	readCtx, spent := budget.Spend(ports.AllowStale(ctx))
	seats, err := s.d.Seats.List(readCtx, eventID, after, limit+1)
	spent()
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
