package memory

import (
	"context"
	"slices"
	"time"

	"github.com/rushgate/rushgate/ports"
)

var _ ports.PrequeueRoom = (*WaitingRoom)(nil)

// closed: the room has a pre-queue not placed yet, so nobody has a rank or is admitted.
func (r *room) closed() bool { return !r.opensAt.IsZero() && !r.opened }

// queued: the user is waiting or pre-queued.
func (r *room) queued(userID string) bool {
	_, waiting := r.waiting[userID]
	_, pre := r.pre[userID]
	return waiting || pre
}

// prequeue enters the user while the room is closed: into the pre-queue before opensAt, at the
// back of the queue after it; a user already in either keeps the place.
func (r *room) prequeue(userID string, now time.Time) ports.QueuePlace {
	place := ports.QueuePlace{Prequeue: true}
	if !r.queued(userID) {
		r.seq++
		if now.Before(r.opensAt) {
			r.pre[userID] = r.seq
		} else {
			r.waiting[userID] = r.seq
			r.order.add(r.seq, 1, r.waiting)
		}
		place.Created = true
	}
	r.seen[userID] = now
	return place
}

// arrivals are the pre-queued users in order of arrival.
func (r *room) arrivals() []string {
	users := make([]string, 0, len(r.pre))
	for u := range r.pre {
		users = append(users, u)
	}
	slices.SortFunc(users, func(a, b string) int { return r.pre[a] - r.pre[b] })
	return users
}

// Prequeued answers the pre-queued users in order of arrival once opensAt has come.
func (w *WaitingRoom) Prequeued(ctx context.Context, eventID string) ([]string, bool, error) {
	var users []string
	opened := false
	err := w.do(ctx, eventID, func(r *room, now time.Time) error {
		switch {
		case !r.closed():
			opened = true
		case now.Before(r.opensAt):
			return ports.ErrPrequeueNotDue
		default:
			users = r.arrivals()
		}
		return nil
	})
	return users, opened, err
}

// PlacePrequeue places the pre-queue, in order, ahead of the later arrivals, once: every
// waiting user gets a new sequence number, the pre-queue's first.
func (w *WaitingRoom) PlacePrequeue(ctx context.Context, eventID string, order []string) (int, bool, error) {
	placed, opened := 0, false
	err := w.do(ctx, eventID, func(r *room, now time.Time) error {
		if !r.closed() {
			return nil
		}
		if now.Before(r.opensAt) {
			return ports.ErrPrequeueNotDue
		}
		line := make([]string, 0, len(r.pre)+len(r.waiting))
		for _, u := range order {
			if _, ok := r.pre[u]; ok {
				line = append(line, u)
				delete(r.pre, u)
			}
		}
		line = append(line, r.arrivals()...)
		placed = len(line)
		line = append(line, r.line()...)
		r.waiting = make(map[string]int, len(line))
		for i, u := range line {
			r.waiting[u] = i + 1
		}
		r.seq = len(line)
		r.order = fenwick{}
		r.order.rebuild(max(64, 2*len(line)), r.waiting)
		clear(r.pre)
		r.opened, opened = true, true
		return nil
	})
	return placed, opened, err
}

// PrequeueOpened reports whether the pre-queue is placed.
func (w *WaitingRoom) PrequeueOpened(ctx context.Context, eventID string) (bool, error) {
	opened := false
	err := w.do(ctx, eventID, func(r *room, _ time.Time) error {
		opened = !r.closed()
		return nil
	})
	return opened, err
}
