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

// arrivals are the pre-queued users in the order they would be placed: those placed already
// (negative numbers, in placing order), then the others by arrival.
func (r *room) arrivals() []string {
	users := make([]string, 0, len(r.pre))
	for u := range r.pre {
		users = append(users, u)
	}
	slices.SortFunc(users, func(a, b string) int { return r.pre[a] - r.pre[b] })
	return users
}

// Prequeued answers the users still pre-queued (not placed yet) by arrival once opensAt has
// come.
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
			users = slices.DeleteFunc(r.arrivals(), func(u string) bool { return r.pre[u] < 0 })
		}
		return nil
	})
	return users, opened, err
}

// PlacePrequeue places the users of next still pre-queued, in order, behind those placed
// already: the k-th placed user's number becomes k-1-placeTotal (the pre-queue's size at the
// first step), below every arrival's, while the room stays closed.
func (w *WaitingRoom) PlacePrequeue(ctx context.Context, eventID string, next []string) (int, error) {
	placed := 0
	err := w.do(ctx, eventID, func(r *room, now time.Time) error {
		if !r.closed() {
			return nil
		}
		if now.Before(r.opensAt) {
			return ports.ErrPrequeueNotDue
		}
		if r.placeTotal == 0 {
			r.placeTotal = len(r.pre)
		}
		for _, u := range next {
			if seq, ok := r.pre[u]; ok && seq > 0 {
				r.pre[u] = r.placed - r.placeTotal
				r.placed++
				placed++
			}
		}
		return nil
	})
	return placed, err
}

// OpenPrequeue places whoever is left by arrival and opens the room: every waiting user gets a
// new sequence number, the pre-queue's first.
func (w *WaitingRoom) OpenPrequeue(ctx context.Context, eventID string) (int, bool, error) {
	placed, opened := 0, false
	err := w.do(ctx, eventID, func(r *room, now time.Time) error {
		if !r.closed() {
			return nil
		}
		if now.Before(r.opensAt) {
			return ports.ErrPrequeueNotDue
		}
		for _, seq := range r.pre {
			if seq > 0 {
				placed++
			}
		}
		line := append(r.arrivals(), r.line()...)
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

// PrequeueOpened reports whether the pre-queue is open.
func (w *WaitingRoom) PrequeueOpened(ctx context.Context, eventID string) (bool, error) {
	opened := false
	err := w.do(ctx, eventID, func(r *room, _ time.Time) error {
		opened = !r.closed()
		return nil
	})
	return opened, err
}
