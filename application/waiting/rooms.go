package waiting

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/ports"
)

// eventRooms is what Service, Broker and Dispatcher each need to know of events and their
// rooms: an event read once, and a room the store lost opened again from the database.
type eventRooms struct {
	events ports.EventRepository
	seats  ports.SeatRepository
	opener ports.RoomOpener
	clock  ports.Clock
	// known caches what never changes about an event (mode, token TTL, seats): polls read it
	// on every call.
	known sync.Map // event id → *waiting.Event
	// loads makes a stampede on an event not read yet cost one read.
	loads singleflight.Group
}

func newEventRooms(events ports.EventRepository, seats ports.SeatRepository, opener ports.RoomOpener, clock ports.Clock) *eventRooms {
	return &eventRooms{events: events, seats: seats, opener: opener, clock: clock}
}

// event returns the event, from the cache after the first read, or waiting.ErrEventNotFound.
// Its slots may be stale; mode, token TTL and seats never change. Only that first read spends
// budget (nil: it has its own timeout): a poll answered from the cache pays nothing for it.
func (r *eventRooms) event(ctx context.Context, budget *guard.Budget, eventID string) (*waiting.Event, error) {
	if err := domain.ValidateUUID("eventId", eventID); err != nil {
		return nil, err
	}
	if e, ok := r.known.Load(eventID); ok {
		return e.(*waiting.Event), nil
	}
	ctx, spent := budget.Spend(ctx)
	defer spent()
	loaded, err, _ := r.loads.Do(eventID, func() (any, error) {
		e, err := r.events.Get(ctx, eventID)
		if err != nil {
			return nil, err
		}
		r.known.Store(eventID, e)
		return e, nil
	})
	if err != nil {
		return nil, err
	}
	return loaded.(*waiting.Event), nil
}

// inRoom runs fn on the event's room; when the store has no room for it (never opened, or lost
// in a Redis flush) it opens it from the database — current slots, and the seat counter at
// the database's count of free seats, gated only while the pre-queue's opensAt is still ahead —
// and runs fn again. A room lost after its opening is opened ungated: the instance that opened
// it remembers the opening as done and would never open the gate of a new one, and the lost
// pre-queue left nobody to place. The opening's two database reads spend the request's budget
// (nil: each read has its own timeout), so a request that opens the room still costs one
// database timeout in all.
func (r *eventRooms) inRoom(ctx context.Context, budget *guard.Budget, eventID string, fn func() error) error {
	err := fn()
	if !errors.Is(err, ports.ErrRoomNotOpen) {
		return err
	}
	readCtx, spent := budget.Spend(ctx)
	current, free, err := r.current(readCtx, eventID)
	spent()
	if err != nil {
		return err
	}
	if err := openRoom(ctx, r.opener, current, current.Slots(), free, r.clock.Now()); err != nil {
		return err
	}
	return fn()
}

// current reads what a room opens with: the event as the database holds it now, and its free
// seats.
func (r *eventRooms) current(ctx context.Context, eventID string) (*waiting.Event, int, error) {
	e, err := r.events.Get(ctx, eventID)
	if err != nil {
		return nil, 0, err
	}
	free, err := r.seats.CountFree(ctx, eventID)
	if err != nil {
		return nil, 0, err
	}
	return e, free, nil
}

// openRoom opens e's room with slots and the seat counter at seats: gated until opensAt for an
// event whose pre-queue opens after now.
func openRoom(ctx context.Context, opener ports.RoomOpener, e *waiting.Event, slots, seats int, now time.Time) error {
	if p, ok := e.Prequeue(); ok && now.Before(p.OpensAt) {
		return opener.OpenGated(ctx, e.ID(), slots, seats, p.OpensAt)
	}
	return opener.Open(ctx, e.ID(), slots, seats)
}
