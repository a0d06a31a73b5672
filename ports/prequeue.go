package ports

import (
	"context"
	"errors"
)

// ErrPrequeueNotDue means the pre-queue's opensAt has not come yet by the store's clock.
var ErrPrequeueNotDue = errors.New("pre-queue not due")

// PrequeueRoom is the pre-queue on the very room of WaitingRoom, for a room opened
// with RoomOpener.OpenGated. Before opensAt (the store's clock) an entering user joins the
// pre-queue: no rank, and nobody is admitted (Enter, Position and Connect answer
// QueuePlace.Prequeue, Claim answers a place with Prequeue, Promote promotes nobody, Snapshot
// answers Prequeue). A user entering at or after opensAt, while the pre-queue is not placed
// yet, queues behind it as a later arrival and is answered Prequeue too. Leaving, the idle rule
// and the disconnect rule apply to pre-queued users as to waiting ones.
//
// Prequeued answers the users still pre-queued (not placed yet) in order of arrival once
// opensAt has come (ErrPrequeueNotDue before), or opened true when the pre-queue is open already
// (or the room has none). Nobody joins the pre-queue after opensAt, so the list only shrinks:
// by users who leave and by placing.
//
// Placing happens in steps, so no single step blocks the store for long, and the room stays
// closed (Prequeue answers, nobody admitted, no ranks) until the last one. PlacePrequeue places
// the users of next still pre-queued, in that order, behind those placed already and ahead of
// every later arrival; it may split next into several atomic steps, and answers how many users
// it placed. A placer passes the pre-queue's order (deterministic from what Prequeued answered:
// any placer computes the same order of the users still there) from its start, in one call or
// several, then calls OpenPrequeue. Several placers may run at once, and a placer that stops
// part-way leaves the rest to the next: a user is placed once, by whichever step reaches them
// first, so the line is the order whoever placed it. Before opensAt it is ErrPrequeueNotDue;
// once open, nothing changes.
//
// OpenPrequeue places any user still pre-queued (one the order missed) by arrival, then opens
// the room: admission starts, later arrivals keep their FIFO order behind the pre-queue. It
// answers how many users it placed and whether this call opened the room: false when it was
// open already (by another placer: nothing changes). Before opensAt it is ErrPrequeueNotDue.
//
// PrequeueOpened reports whether the pre-queue is open (true for a room without one).
type PrequeueRoom interface {
	Prequeued(ctx context.Context, eventID string) (users []string, opened bool, err error)
	PlacePrequeue(ctx context.Context, eventID string, next []string) (placed int, err error)
	OpenPrequeue(ctx context.Context, eventID string) (placed int, opened bool, err error)
	PrequeueOpened(ctx context.Context, eventID string) (bool, error)
}
