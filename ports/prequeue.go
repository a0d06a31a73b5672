package ports

import (
	"context"
	"errors"
)

// ErrPrequeueNotDue means the pre-queue's opensAt has not come yet by the store's clock.
var ErrPrequeueNotDue = errors.New("pre-queue not due")

// PrequeueRoom is the pre-queue of SPEC §8 on the very room of WaitingRoom, for a room opened
// with RoomOpener.OpenGated. Before opensAt (the store's clock) an entering user joins the
// pre-queue: no rank, and nobody is admitted (Enter, Position and Connect answer
// QueuePlace.Prequeue, Claim answers a place with Prequeue, Promote promotes nobody, Snapshot
// answers Prequeue). A user entering at or after opensAt, while the pre-queue is not placed
// yet, queues behind it as a later arrival and is answered Prequeue too. Leaving, the idle rule
// and the disconnect rule apply to pre-queued users as to waiting ones.
//
// Prequeued answers the pre-queued users in order of arrival once opensAt has come
// (ErrPrequeueNotDue before), or opened true when the pre-queue is placed already (or the room
// has none). Nobody joins the pre-queue after opensAt, so the list is final but for users who
// leave.
//
// PlacePrequeue places the pre-queue, once, in one atomic step: the users of order still
// pre-queued, in that order, then any other pre-queued user in order of arrival, all ahead of
// every later arrival, who keep their FIFO order; admission starts. It answers how many users
// it placed and whether this call placed them: false when the pre-queue was placed already
// (by another instance: nothing changes). Before opensAt it is ErrPrequeueNotDue.
//
// PrequeueOpened reports whether the pre-queue is placed (true for a room without one).
type PrequeueRoom interface {
	Prequeued(ctx context.Context, eventID string) (users []string, opened bool, err error)
	PlacePrequeue(ctx context.Context, eventID string, order []string) (placed int, opened bool, err error)
	PrequeueOpened(ctx context.Context, eventID string) (bool, error)
}
