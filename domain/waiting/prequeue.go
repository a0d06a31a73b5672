package waiting

import (
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/draw"
)

// PrequeueOrder is how an event's pre-queue is placed at opensAt.
type PrequeueOrder string

// Pre-queue orders.
const (
	// PrequeueShuffle places the pre-queue in draw order: tickets ascending (package draw).
	PrequeueShuffle PrequeueOrder = "shuffle"
	// PrequeueFIFO places the pre-queue in order of arrival.
	PrequeueFIFO PrequeueOrder = "fifo"
)

// Prequeue is an event's pre-queue: the users who enter before OpensAt wait without a rank and
// nobody is admitted; at OpensAt they are placed, in Order, ahead of every later arrival. Seed
// is the commitment the shuffle is drawn from: chosen at creation, only its hash shown until
// the pre-queue is placed.
type Prequeue struct {
	OpensAt time.Time
	Order   PrequeueOrder
	Seed    draw.Seed
}

// NewPrequeue validates a pre-queue opening at opensAt (in the future; kept to the
// millisecond, the stores' resolution) in order ("" is shuffle).
func NewPrequeue(opensAt time.Time, order string, seed draw.Seed, now time.Time) (Prequeue, error) {
	if err := domain.ValidateInstant("opensAt", opensAt); err != nil {
		return Prequeue{}, err
	}
	if !opensAt.After(now) {
		return Prequeue{}, domain.Invalid("opensAt", "must be in the future")
	}
	o := PrequeueOrder(order)
	if o == "" {
		o = PrequeueShuffle
	}
	if o != PrequeueShuffle && o != PrequeueFIFO {
		return Prequeue{}, domain.Invalid("prequeue", `must be "shuffle" or "fifo"`)
	}
	return Prequeue{OpensAt: opensAt.UTC().Truncate(time.Millisecond), Order: o, Seed: seed}, nil
}

// Place orders the pre-queued users, given in order of arrival, as they are placed at opensAt:
// draw order for a shuffle, arrival order for fifo.
func (p Prequeue) Place(arrivals []string) []string {
	if p.Order == PrequeueFIFO {
		return arrivals
	}
	return draw.OrderUsers(p.Seed, arrivals)
}

// Prequeue is the event's pre-queue, if it has one.
func (e *Event) Prequeue() (Prequeue, bool) { return e.prequeue, !e.prequeue.OpensAt.IsZero() }

// SetPrequeue gives the event a pre-queue: at creation, and when an adapter restores it.
func (e *Event) SetPrequeue(p Prequeue) { e.prequeue = p }
