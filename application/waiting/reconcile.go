package waiting

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/ports"
)

// Reconcile is one pass of the background work over the events in use (the store's index, no
// keyspace scan): it gives back the slots of expired tokens, drops waiting users idle past
// IdleTimeout, lets the store forget a room it finds empty after Retention, repairs the seat
// counter from the database, writes again what a Redis restarted from its file lost
// (redoLostWrites; a listed room it lost whole is opened again from the database), measures
// the admission rate and reports each event's numbers, then the list of events in use, to the
// Observer. Several instances may run it at once: each expiry and drop happens once in the
// store. It returns the first error after trying every event.
func (s *Service) Reconcile(ctx context.Context) error {
	events, err := s.d.Room.Events(ctx)
	if err != nil {
		return fmt.Errorf("list waiting rooms: %w", err)
	}
	var errs []error
	for _, eventID := range events {
		if err := s.reconcileEvent(ctx, eventID); err != nil {
			errs = append(errs, fmt.Errorf("event %s: %w", eventID, err))
		}
	}
	s.predicted.keepOnly(events)
	if s.d.Observer != nil {
		s.d.Observer.RoomsInUse(events)
	}
	return errors.Join(errs...)
}

func (s *Service) reconcileEvent(ctx context.Context, eventID string) error {
	if _, foreign := s.foreign.Load(eventID); foreign {
		return nil
	}
	// The event's database work in this pass shares one timeout, as a request's does, so a slow
	// database holds the next event up by one timeout at most.
	budget := guard.NewBudget(s.cfg.Timeout)
	e, err := s.rooms.event(ctx, budget, eventID)
	if errors.Is(err, waiting.ErrEventNotFound) || errors.Is(err, domain.ErrValidation) {
		// A room of another deployment sharing this Redis (or of a test): not ours to touch.
		s.foreign.Store(eventID, struct{}{})
		return nil
	} else if err != nil {
		return err
	}
	// Push users show life by staying connected, not by polling: they leave by the disconnect
	// rules, never as idle.
	// A sign of life is recorded once a step (Config.signOfLifeStep), so the last one recorded
	// can be up to a step older than the user's last poll.
	idle := s.cfg.IdleTimeout + s.cfg.signOfLifeStep()
	if e.Mode() == waiting.ModePush {
		idle = 0
	}
	s.armOpening(e)
	// A listed event may have no room: the store lists an event before it writes the room, so a
	// Redis restarted from a log cut in between (or a cluster node that lost the room) keeps the
	// listing alone. The room is opened again from the database, as the event's next use would,
	// rather than unlisted: an open in flight lists the event first too, and would be left with
	// a room no pass finds. Opened empty, the room leaves the index on this very pass.
	var done ports.Reconciled
	err = s.rooms.inRoom(ctx, budget, eventID, func() error {
		if _, err := s.openPrequeue(ctx, e); err != nil {
			return err
		}
		done, err = s.d.Room.Reconcile(ctx, eventID, idle, s.cfg.Retention)
		return err
	})
	if err != nil {
		return err
	}
	if s.d.Observer != nil && len(done.WaitErrors) > 0 {
		s.d.Observer.WaitErrorsObserved(eventID, done.WaitErrors)
	}
	if _, sold := s.soldOut.Load(eventID); !sold {
		if err := s.repairSeatCounter(ctx, budget, eventID); err != nil {
			return err
		}
	}
	stats, err := s.d.Room.Stats(ctx, eventID)
	if err != nil {
		return err
	}
	if err := s.redoLostWrites(ctx, budget, e, stats); err != nil {
		return err
	}
	s.d.Rates.observe(eventID, stats.Claims, s.d.Clock.Now())
	if s.d.Observer != nil {
		s.d.Observer.RoomObserved(eventID, stats)
	}
	return nil
}

// redoLostWrites writes again what the room (stats) lost of what this instance or the database
// knows: a Redis restarted from an append-only file that misses its last writes (appendfsync
// everysec: up to a second of them) comes back with a consistent but older room, while the
// database and this instance's memory hold the newer state. A room marked sold out is marked
// again, the slots are set again to the database's (unless a slot change came between the two
// reads), and a pre-queue this instance remembers as opened, found gated again, is opened again
// (placing the users left in the pre-queue in the same ticket order). Its database read spends
// budget.
func (s *Service) redoLostWrites(ctx context.Context, budget *guard.Budget, e *waiting.Event, stats ports.RoomStats) error {
	if _, sold := s.soldOut.Load(e.ID()); sold && !stats.SoldOut {
		if err := s.d.Room.MarkSoldOut(ctx, e.ID()); err != nil {
			return fmt.Errorf("mark sold out again: %w", err)
		}
	}
	// Read from the primary after the room: a slot change writes the database first, so this
	// read is never older than the room's slots, and ResetSlots refuses a change made since.
	readCtx, spent := budget.Spend(ctx)
	current, err := s.d.Events.Get(readCtx, e.ID())
	spent()
	if err != nil {
		return fmt.Errorf("read event: %w", err)
	}
	if current.Slots() != stats.Slots {
		if _, err := s.d.Room.ResetSlots(ctx, e.ID(), stats.Slots, current.Slots()); err != nil {
			return fmt.Errorf("set slots again: %w", err)
		}
	}
	if _, opened := s.opened.Load(e.ID()); opened && stats.Gated {
		s.opened.Delete(e.ID())
		if _, err := s.openPrequeue(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// AdmissionRates hold, per event, the admission rate this instance measures from the store's
// claim counter at each reconciliation pass (over the last waiting.RateWindow), for
// the wait estimates of the pull statuses and the push positions. One instance's Service and
// Broker share one.
type AdmissionRates struct {
	mu      sync.Mutex
	byEvent map[string]*waiting.AdmissionRate
}

// NewAdmissionRates returns rates with nothing measured yet.
func NewAdmissionRates() *AdmissionRates {
	return &AdmissionRates{byEvent: make(map[string]*waiting.AdmissionRate)}
}

func (r *AdmissionRates) observe(eventID string, claims int64, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rate := r.byEvent[eventID]
	if rate == nil {
		rate = &waiting.AdmissionRate{}
		r.byEvent[eventID] = rate
	}
	rate.Observe(claims, now)
}

// perSecond is the measured rate at now, nil while unknown (fewer than two passes within the
// window).
func (r *AdmissionRates) perSecond(eventID string, now time.Time) *float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	rate := r.byEvent[eventID]
	if rate == nil {
		return nil
	}
	v, ok := rate.PerSecond(now)
	if !ok {
		return nil
	}
	return &v
}

// estimate is the wait of a user with ahead admissions to go (waiting.EstimateWait), nil while
// unknown.
func (r *AdmissionRates) estimate(eventID string, ahead int, now time.Time) *int {
	var perSecond float64
	if rate := r.perSecond(eventID, now); rate != nil {
		perSecond = *rate
	}
	seconds, ok := waiting.EstimateWait(ahead, perSecond)
	if !ok {
		return nil
	}
	return &seconds
}
