package waiting

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/draw"
	"github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/ports"
)

// PrequeueView is what a pre-queued user is told (SPEC §8): when the sale opens, and the
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
	opensAt, err := time.Parse(time.RFC3339, cmd.OpensAt)
	if err != nil {
		return domain.Invalid("opensAt", "must be an RFC 3339 time such as 2030-01-02T15:04:05Z")
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

// PublicEventView is an event as any user sees it (SPEC §8): a pre-queue's Seed (hex) is
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
// counter) and, once its pre-queue is placed, the seed.
func (s *Service) Event(ctx context.Context, eventID string) (PublicEventView, error) {
	e, err := s.rooms.event(ctx, eventID)
	if err != nil {
		return PublicEventView{}, err
	}
	current, err := s.d.Events.Get(ports.AllowStale(ctx), eventID)
	if err != nil {
		return PublicEventView{}, err
	}
	v := PublicEventView{ID: e.ID(), Name: e.Name(), Mode: string(e.Mode()), Seats: e.Seats(), Slots: current.Slots()}
	var seatsLeft int
	err = s.rooms.inRoom(ctx, eventID, func() error {
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
	opened, err := s.prequeueOpened(ctx, eventID)
	if err != nil {
		return PublicEventView{}, err
	}
	if opened {
		v.Seed = p.Seed.Hex()
	}
	return v, nil
}

// prequeueOpened reports whether the store placed the event's pre-queue.
func (s *Service) prequeueOpened(ctx context.Context, eventID string) (bool, error) {
	if _, ok := s.opened.Load(eventID); ok {
		return true, nil
	}
	var opened bool
	err := s.rooms.inRoom(ctx, eventID, func() error {
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

// openPrequeue places e's pre-queue once its opensAt has come (SPEC §8): the pre-queued users,
// read from the store, are ordered here (draw order from the seed, or arrival) and placed in
// one atomic step of the store, which only the first of any number of instances doing the
// same achieves; the others' step changes nothing. An instance that dies before that step
// leaves the pre-queue as it was, for the next pass to place.
func (s *Service) openPrequeue(ctx context.Context, e *waiting.Event) error {
	p, ok := e.Prequeue()
	if !ok || s.d.Clock.Now().Before(p.OpensAt) {
		return nil
	}
	if _, done := s.opened.Load(e.ID()); done {
		return nil
	}
	arrivals, opened, err := s.d.Room.Prequeued(ctx, e.ID())
	if errors.Is(err, ports.ErrPrequeueNotDue) { // the store's clock is behind ours: next pass
		return nil
	}
	if err != nil {
		return fmt.Errorf("read pre-queue: %w", err)
	}
	if !opened {
		if _, _, err := s.d.Room.PlacePrequeue(ctx, e.ID(), p.Place(arrivals)); err != nil {
			return fmt.Errorf("place pre-queue: %w", err)
		}
	}
	s.opened.Store(e.ID(), struct{}{})
	return nil
}
