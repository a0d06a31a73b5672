package waiting

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/waiting"
)

// Reconcile is one pass of the background work over the events in use (the store's index, no
// keyspace scan): it gives back the slots of expired tokens, drops waiting users idle past
// IdleTimeout, repairs the seat counter from the database, measures the admission rate and
// reports each event's numbers to the Observer. Several instances may run it at once: each
// expiry and drop happens once in the store. It returns the first error after trying every
// event.
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
	return errors.Join(errs...)
}

func (s *Service) reconcileEvent(ctx context.Context, eventID string) error {
	if _, foreign := s.foreign.Load(eventID); foreign {
		return nil
	}
	e, err := s.event(ctx, eventID)
	if errors.Is(err, waiting.ErrEventNotFound) || errors.Is(err, domain.ErrValidation) {
		// A room of another deployment sharing this Redis (or of a test): not ours to touch.
		s.foreign.Store(eventID, struct{}{})
		return nil
	} else if err != nil {
		return err
	}
	// Push users show life by staying connected, not by polling: they leave by the disconnect
	// rules, never as idle.
	idle := s.cfg.IdleTimeout
	if e.Mode() == waiting.ModePush {
		idle = 0
	}
	if _, err := s.d.Room.Reconcile(ctx, eventID, idle); err != nil {
		return err
	}
	if _, sold := s.soldOut.Load(eventID); !sold {
		if err := s.repairSeatCounter(ctx, eventID); err != nil {
			return err
		}
	}
	stats, err := s.d.Room.Stats(ctx, eventID)
	if err != nil {
		return err
	}
	s.rates.observe(eventID, stats.Claims, s.d.Clock.Now())
	if s.d.Observer != nil {
		s.d.Observer.RoomObserved(eventID, stats)
	}
	return nil
}

// admissionRates measures, per event, admissions per second from the store's claim counter
// between reconciliation passes, smoothed so one quiet tick does not zero the estimate.
type admissionRates struct {
	mu      sync.Mutex
	byEvent map[string]*admissionRate
}

type admissionRate struct {
	claims   int64
	at       time.Time
	perSec   float64
	measured bool
}

// smoothing weighs the newest tick's rate against the history.
const smoothing = 0.5

func (r *admissionRates) observe(eventID string, claims int64, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rate := r.byEvent[eventID]
	if rate == nil {
		r.byEvent[eventID] = &admissionRate{claims: claims, at: now}
		return
	}
	elapsed := now.Sub(rate.at).Seconds()
	if elapsed <= 0 {
		return
	}
	latest := float64(claims-rate.claims) / elapsed
	if rate.measured {
		latest = smoothing*latest + (1-smoothing)*rate.perSec
	}
	rate.claims, rate.at, rate.perSec, rate.measured = claims, now, latest, true
}

// perSecond is the measured rate, nil before two passes.
func (r *admissionRates) perSecond(eventID string) *float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	rate := r.byEvent[eventID]
	if rate == nil || !rate.measured {
		return nil
	}
	v := rate.perSec
	return &v
}

// estimate is how long ahead admissions take at the measured rate, rounded up: 0 when nobody
// must go first, nil while the rate is unknown or zero.
func (r *admissionRates) estimate(eventID string, ahead int) *int {
	if ahead == 0 {
		zero := 0
		return &zero
	}
	rate := r.perSecond(eventID)
	if rate == nil || *rate <= 0 {
		return nil
	}
	seconds := int(math.Ceil(float64(ahead) / *rate))
	return &seconds
}
