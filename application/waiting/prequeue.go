package waiting

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/draw"
	"github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/ports"
)

// PrequeueView is what a pre-queued user is told: when the sale opens, and the
// commitment their place will be drawn from.
type PrequeueView struct {
	OpensAt  time.Time
	SeedHash string
}

// prequeueViewOf is e's pre-queue as users see it; nil without one.
func prequeueViewOf(e *waiting.Event) *PrequeueView {
	p, ok := e.Prequeue()
	if !ok {
		return nil
	}
	return &PrequeueView{OpensAt: p.OpensAt, SeedHash: p.Seed.Hash()}
}

// schedulePrequeue gives e the pre-queue cmd asks for, with a fresh seed; none without OpensAt.
func (s *Service) schedulePrequeue(e *waiting.Event, cmd CreateEventCommand) error {
	if cmd.OpensAt == "" {
		if cmd.Prequeue != "" {
			return domain.Invalid("prequeue", "needs opensAt")
		}
		return nil
	}
	opensAt, err := domain.ParseInstant("opensAt", cmd.OpensAt)
	if err != nil {
		return err
	}
	seed, err := draw.RandomSeed()
	if err != nil {
		return fmt.Errorf("create event: %w", err)
	}
	p, err := waiting.NewPrequeue(opensAt, cmd.Prequeue, seed, s.d.Clock.Now())
	if err != nil {
		return err
	}
	e.SetPrequeue(p)
	return nil
}

// PublicEventView is an event as any user sees it: a pre-queue's Seed (hex) is
// published once the pre-queue is placed, never before. SoldOut: no seat remains.
type PublicEventView struct {
	ID       string
	Name     string
	Mode     string
	Seats    int
	Slots    int
	OpensAt  *time.Time
	Prequeue string
	SeedHash string
	Seed     string
	SoldOut  bool
}

// Event answers GET /events/{eventId}: the event, whether it is sold out (the room's seat
// counter) and, once its pre-queue is placed, the seed. Its database reads (the event's current
// slots, those that open a lost room) share one Config.Timeout.
func (s *Service) Event(ctx context.Context, eventID string) (PublicEventView, error) {
	budget := guard.NewBudget(s.cfg.Timeout)
	e, err := s.rooms.event(ctx, budget, eventID)
	if err != nil {
		return PublicEventView{}, err
	}
	readCtx, spent := budget.Spend(ports.AllowStale(ctx))
	current, err := s.d.Events.Get(readCtx, eventID)
	spent()
	if err != nil {
		return PublicEventView{}, err
	}
	v := PublicEventView{ID: e.ID(), Name: e.Name(), Mode: string(e.Mode()), Seats: e.Seats(), Slots: current.Slots()}
	var seatsLeft int
	err = s.rooms.inRoom(ctx, budget, eventID, func() error {
		seatsLeft, err = s.d.Room.SeatsLeft(ctx, eventID)
		return err
	})
	if err != nil {
		return PublicEventView{}, fmt.Errorf("read seat counter: %w", err)
	}
	v.SoldOut = seatsLeft <= 0
	p, ok := e.Prequeue()
	if !ok {
		return v, nil
	}
	v.OpensAt, v.Prequeue, v.SeedHash = &p.OpensAt, string(p.Order), p.Seed.Hash()
	opened, err := s.prequeueOpened(ctx, budget, eventID)
	if err != nil {
		return PublicEventView{}, err
	}
	if opened {
		v.Seed = p.Seed.Hex()
	}
	return v, nil
}

// prequeueOpened reports whether the store placed the event's pre-queue; opening a lost room
// spends budget.
func (s *Service) prequeueOpened(ctx context.Context, budget *guard.Budget, eventID string) (bool, error) {
	if _, ok := s.opened.Load(eventID); ok {
		return true, nil
	}
	var opened bool
	err := s.rooms.inRoom(ctx, budget, eventID, func() error {
		var err error
		opened, err = s.d.Room.PrequeueOpened(ctx, eventID)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("read pre-queue state: %w", err)
	}
	if opened {
		s.opened.Store(eventID, struct{}{})
	}
	return opened, nil
}

// openPrequeue opens e's pre-queue once its opensAt has come: the users still
// pre-queued, read from the store, are ordered here (draw order from the seed, or arrival) and
// placed in short steps of the store, then the store opens the room. Any number of instances
// may do it at once, and one that dies part-way leaves the rest to the next: the order is the
// same from every instance (the pre-queue only shrinks after opensAt, and a draw orders any
// subset alike), and each user is placed once. It answers whether the pre-queue is open.
func (s *Service) openPrequeue(ctx context.Context, e *waiting.Event) (bool, error) {
	p, ok := e.Prequeue()
	if !ok {
		return true, nil
	}
	if s.d.Clock.Now().Before(p.OpensAt) {
		return false, nil
	}
	if _, done := s.opened.Load(e.ID()); done {
		return true, nil
	}
	// The timer and the pass of this instance would place the same users twice over.
	if _, busy := s.placing.LoadOrStore(e.ID(), struct{}{}); busy {
		return false, nil
	}
	defer s.placing.Delete(e.ID())
	remaining, opened, err := s.d.Room.Prequeued(ctx, e.ID())
	if errors.Is(err, ports.ErrPrequeueNotDue) { // the store's clock is behind ours: try again
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read pre-queue: %w", err)
	}
	if !opened {
		if _, err := s.d.Room.PlacePrequeue(ctx, e.ID(), p.Place(remaining)); err != nil {
			return false, fmt.Errorf("place pre-queue: %w", err)
		}
		_, openedHere, err := s.d.Room.OpenPrequeue(ctx, e.ID())
		if err != nil {
			return false, fmt.Errorf("open pre-queue: %w", err)
		}
		if openedHere && s.d.Observer != nil {
			s.d.Observer.PrequeueOpened(e.ID(), s.d.Clock.Now().Sub(p.OpensAt))
		}
	}
	s.opened.Store(e.ID(), struct{}{})
	return true, nil
}

// Opening timers: an instance arms one for a pre-queue opening within openingHorizon (a later
// one is armed by a later reconciliation pass), at most maxOpeningTimers at once; the pass
// opens whatever a timer did not. A timer that finds the opening not due yet (the store's
// clock may lag this instance's), or that fails (a store that did not answer in time), tries
// again every openingRetry, openingRetries times, rather than leave the opening to a pass that
// may come a tick later and reach the event behind other events' work.
const (
	openingHorizon   = time.Hour
	maxOpeningTimers = 1024
	openingRetry     = 100 * time.Millisecond
	openingRetries   = 50
)

// openingTimers are the opening timers an instance armed, ended by Close.
type openingTimers struct {
	mu      sync.Mutex
	life    context.Context
	end     context.CancelFunc
	running sync.WaitGroup
	armed   map[string]struct{} // event id
}

func newOpeningTimers() *openingTimers {
	life, end := context.WithCancel(context.Background())
	return &openingTimers{life: life, end: end, armed: make(map[string]struct{})}
}

// arm runs open in its own goroutine unless a timer for eventID is armed already, the bound is
// reached or the timers ended.
func (t *openingTimers) arm(eventID string, open func(ctx context.Context)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, armed := t.armed[eventID]; armed || len(t.armed) >= maxOpeningTimers || t.life.Err() != nil {
		return
	}
	t.armed[eventID] = struct{}{}
	t.running.Add(1)
	go func() {
		defer t.running.Done()
		open(t.life)
		t.mu.Lock()
		delete(t.armed, eventID)
		t.mu.Unlock()
	}()
}

// close ends every timer and waits for them.
func (t *openingTimers) close() {
	t.mu.Lock()
	t.end()
	t.mu.Unlock()
	t.running.Wait()
}

// armOpening arms e's opening timer: at opensAt by the Clock (the Sleeper waits), the
// pre-queue opens without waiting for the next reconciliation pass. Without a Sleeper, for an
// event open already or due already, nothing is armed.
func (s *Service) armOpening(e *waiting.Event) {
	p, ok := e.Prequeue()
	if !ok || s.d.Sleeper == nil {
		return
	}
	if _, done := s.opened.Load(e.ID()); done {
		return
	}
	// Once opensAt has passed, the pass that sees the event opens it.
	if wait := p.OpensAt.Sub(s.d.Clock.Now()); wait <= 0 || wait > openingHorizon {
		return
	}
	s.openings.arm(e.ID(), func(ctx context.Context) {
		if err := s.d.Sleeper.Sleep(ctx, p.OpensAt.Sub(s.d.Clock.Now())); err != nil {
			return
		}
		for range openingRetries {
			// An error is the reconciliation pass's to report; the pass retries it too.
			if opened, _ := s.openPrequeue(ctx, e); opened {
				return
			}
			if err := s.d.Sleeper.Sleep(ctx, openingRetry); err != nil {
				return
			}
		}
	})
}

// Close ends this instance's opening timers and waits for them; an opening they did not
// finish is left to any instance's next reconciliation pass.
func (s *Service) Close() { s.openings.close() }
