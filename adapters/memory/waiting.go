package memory

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/rushgate/rushgate/ports"
)

var _ ports.WaitingRoom = (*WaitingRoom)(nil)

// WaitingRoom keeps the events' queues and entry tokens in process, with the semantics of the
// Redis one: every method is atomic under one mutex, as a Redis script is, and expiries run on
// a ports.Clock. Ranks cost O(log n) through a Fenwick tree over entry sequence numbers.
//
// A room Reconcile found empty expires as the Redis one's keys do (ports.RoomReconciler): a
// call on it after its expiry forgets it, and Events, which every reconciliation pass and
// dispatcher tick starts with, forgets every room expired by then, so a finished event leaves
// nothing in the process.
type WaitingRoom struct {
	clock ports.Clock

	mu    sync.Mutex
	rooms map[string]*room
	// active is the index of events in use (ports.WaitingRoom.Events); emptied, the rooms that
	// expire (room.expiresAt).
	active  map[string]bool
	emptied map[string]bool
	// dispatch is each broker's dispatch stream, brokers each broker's heartbeat deadline
	// (ports.PushQueue, push.go).
	dispatch map[string]*stream
	brokers  map[string]time.Time
}

// room is one event's waiting room.
type room struct {
	slots, seats int
	seq          int                  // the last entry's sequence number
	order        fenwick              // 1 at the sequence number of every waiting user
	waiting      map[string]int       // waiting user → sequence number
	seen         map[string]time.Time // waiting user → last sign of life
	admitted     map[string]admission
	// owners is the push mode's user → connection owner; entry its stream of promotions.
	owners map[string]string
	entry  *stream
	// opensAt gates a room with a pre-queue until opened; pre is its pre-queued users →
	// arrival sequence number (ports.PrequeueRoom).
	opensAt time.Time
	opened  bool
	pre     map[string]int
	// placeTotal is the pre-queue's size at the first placing step, placed the users placed
	// since: a placed user's number in pre is negative, in placing order.
	placeTotal, placed int
	// earliest is at or before every admitted token's expiry, so pruning can skip the scan
	// until then.
	earliest                           time.Time
	claims, expired, dropped, released int64
	// soldOut: marked sold out (ports.SeatCounter.MarkSoldOut), for good.
	soldOut bool
	// predicted is each waiting user's first wait estimate (ports.WaitPredictor); waits the
	// wait errors kept, newest last, and fresh those no Reconcile has answered yet.
	predicted    map[string]prediction
	waits, fresh []time.Duration
	// pruned is how many tokens the current call's prune expired.
	pruned int
	// expiresAt is when the room is forgotten, set by the Reconcile that found it empty; zero
	// while it is kept.
	expiresAt time.Time
}

type prediction struct {
	at      time.Time
	seconds int
}

type admission struct {
	token     string
	expiresAt time.Time
}

// NewWaitingRoom returns an empty store whose token expiries run on clock.
func NewWaitingRoom(clock ports.Clock) *WaitingRoom {
	return &WaitingRoom{clock: clock, rooms: make(map[string]*room), active: make(map[string]bool),
		emptied: make(map[string]bool), dispatch: make(map[string]*stream), brokers: make(map[string]time.Time)}
}

// do runs fn on eventID's room under the mutex, or fails with ports.ErrRoomNotOpen.
func (w *WaitingRoom) do(ctx context.Context, eventID string, fn func(r *room, now time.Time) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	r := w.live(eventID, now)
	if r == nil {
		return ports.ErrRoomNotOpen
	}
	r.pruned = r.prune(now)
	return fn(r, now)
}

// live answers eventID's room, nil when there is none or it expired by now, which it forgets.
func (w *WaitingRoom) live(eventID string, now time.Time) *room {
	r := w.rooms[eventID]
	if r == nil || r.expiresAt.IsZero() || now.Before(r.expiresAt) {
		return r
	}
	delete(w.rooms, eventID)
	delete(w.emptied, eventID)
	delete(w.active, eventID)
	return nil
}

// keep makes a room live, listed among the events in use: a user entered it, its slots changed
// or it was opened (again).
func (w *WaitingRoom) keep(eventID string, r *room) {
	r.expiresAt = time.Time{}
	delete(w.emptied, eventID)
	w.active[eventID] = true
}

// Open creates the room unless it exists. See ports.WaitingRoom.
func (w *WaitingRoom) Open(ctx context.Context, eventID string, slots, seats int) error {
	return w.OpenGated(ctx, eventID, slots, seats, time.Time{})
}

// OpenGated creates the room with a pre-queue opening at opensAt (none when zero) unless it
// exists.
func (w *WaitingRoom) OpenGated(ctx context.Context, eventID string, slots, seats int, opensAt time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.live(eventID, w.clock.Now())
	if r == nil {
		r = &room{slots: slots, seats: seats, waiting: make(map[string]int),
			seen: make(map[string]time.Time), admitted: make(map[string]admission),
			owners: make(map[string]string), entry: newStream(), opensAt: opensAt, pre: make(map[string]int),
			soldOut: seats <= 0, predicted: make(map[string]prediction)}
		w.rooms[eventID] = r
	}
	w.keep(eventID, r)
	return nil
}

// Enter queues the user at the back unless already waiting or admitted.
func (w *WaitingRoom) Enter(ctx context.Context, eventID, userID string) (ports.QueuePlace, error) {
	var place ports.QueuePlace
	err := w.do(ctx, eventID, func(r *room, now time.Time) error {
		if r.soldOut {
			return ports.ErrSoldOut
		}
		w.keep(eventID, r)
		place = r.enter(userID, now)
		return nil
	})
	return place, err
}

// enter queues the user at the back unless already waiting or admitted.
func (r *room) enter(userID string, now time.Time) ports.QueuePlace {
	if a, ok := r.admitted[userID]; ok {
		return ports.QueuePlace{Admitted: true, RemainingSlots: r.remaining(), ExpiresAt: a.expiresAt}
	}
	if r.closed() {
		return r.prequeue(userID, now)
	}
	var place ports.QueuePlace
	if _, ok := r.waiting[userID]; !ok {
		r.seq++
		r.waiting[userID] = r.seq
		r.order.add(r.seq, 1, r.waiting)
		place.Created = true
	}
	r.seen[userID] = now
	place.Rank, place.RemainingSlots = r.rank(userID), r.remaining()
	return place
}

// Position answers the user's place, refreshing an admitted user's token.
func (w *WaitingRoom) Position(ctx context.Context, eventID, userID string, ttl, signEvery time.Duration) (ports.QueuePlace, error) {
	var place ports.QueuePlace
	err := w.do(ctx, eventID, func(r *room, now time.Time) error {
		if r.soldOut {
			return ports.ErrSoldOut
		}
		if a, ok := r.admitted[userID]; ok {
			a.expiresAt = now.Add(ttl)
			r.admitted[userID] = a
			place = ports.QueuePlace{Admitted: true, RemainingSlots: r.remaining(), ExpiresAt: a.expiresAt}
			return nil
		}
		if !r.queued(userID) {
			return ports.ErrNotQueued
		}
		if now.Sub(r.seen[userID]) >= signEvery {
			r.seen[userID] = now
		}
		if r.closed() {
			place.Prequeue = true
			return nil
		}
		place.Rank, place.RemainingSlots = r.rank(userID), r.remaining()
		return nil
	})
	return place, err
}

// Claim admits the user when rank < remaining slots.
func (w *WaitingRoom) Claim(ctx context.Context, eventID, userID, token string, ttl time.Duration) (ports.ClaimResult, error) {
	var res ports.ClaimResult
	err := w.do(ctx, eventID, func(r *room, now time.Time) error {
		if r.soldOut {
			return ports.ErrSoldOut
		}
		if a, ok := r.admitted[userID]; ok {
			a.expiresAt = now.Add(ttl)
			r.admitted[userID] = a
			res = ports.ClaimResult{Claimed: true, Token: a.token, ExpiresAt: a.expiresAt}
			return nil
		}
		if !r.queued(userID) {
			return ports.ErrNotQueued
		}
		if r.closed() {
			res.Place = ports.QueuePlace{Prequeue: true}
			return nil
		}
		place := ports.QueuePlace{Rank: r.rank(userID), RemainingSlots: r.remaining()}
		if !place.Ready() {
			res.Place = place
			return nil
		}
		r.waited(userID, now)
		r.leave(userID)
		expiresAt := now.Add(ttl)
		r.admitted[userID] = admission{token: token, expiresAt: expiresAt}
		if len(r.admitted) == 1 || expiresAt.Before(r.earliest) {
			r.earliest = expiresAt
		}
		r.claims++
		res = ports.ClaimResult{Claimed: true, Created: true, Token: token, ExpiresAt: expiresAt}
		return nil
	})
	return res, err
}

// Release frees the user's slot once.
func (w *WaitingRoom) Release(ctx context.Context, eventID, userID string) (bool, error) {
	freed := false
	err := w.do(ctx, eventID, func(r *room, _ time.Time) error {
		if _, ok := r.admitted[userID]; ok {
			delete(r.admitted, userID)
			r.released++
			freed = true
		}
		return nil
	})
	return freed, err
}

// Leave takes a waiting or pre-queued user out of the line. See ports.PullQueue.
func (w *WaitingRoom) Leave(ctx context.Context, eventID, userID string) error {
	return w.do(ctx, eventID, func(r *room, _ time.Time) error {
		r.leave(userID)
		return nil
	})
}

// Verify reports whether token is the user's live token, and the seat counter.
func (w *WaitingRoom) Verify(ctx context.Context, eventID, userID, token string) (valid bool, seatsLeft int, err error) {
	err = w.do(ctx, eventID, func(r *room, _ time.Time) error {
		a, ok := r.admitted[userID]
		valid, seatsLeft = ok && a.token != "" && a.token == token, r.seats
		return nil
	})
	return valid, seatsLeft, err
}

// Reconcile frees expired tokens' slots (done by do) and drops idle waiting users; an empty
// room leaves the index and expires after retention.
func (w *WaitingRoom) Reconcile(ctx context.Context, eventID string, idle, retention time.Duration) (ports.Reconciled, error) {
	var done ports.Reconciled
	err := w.do(ctx, eventID, func(r *room, now time.Time) error {
		done.Expired = r.pruned
		done.WaitErrors, r.fresh = r.fresh, nil
		if idle > 0 {
			cutoff := now.Add(-idle)
			for userID, at := range r.seen {
				if !at.After(cutoff) {
					r.leave(userID)
					r.dropped++
					done.Dropped++
				}
			}
		}
		if len(r.waiting) == 0 && len(r.pre) == 0 && len(r.admitted) == 0 {
			delete(w.active, eventID)
			if r.expiresAt.IsZero() {
				r.expiresAt = now.Add(retention)
				w.emptied[eventID] = true
			}
		}
		return nil
	})
	return done, err
}

// SetSlots changes the slots and answers the remaining ones.
func (w *WaitingRoom) SetSlots(ctx context.Context, eventID string, slots int) (int, error) {
	remaining := 0
	err := w.do(ctx, eventID, func(r *room, _ time.Time) error {
		w.keep(eventID, r)
		r.slots = slots
		remaining = r.remaining()
		return nil
	})
	return remaining, err
}

// ResetSlots sets the slots to slots if they still are from.
func (w *WaitingRoom) ResetSlots(ctx context.Context, eventID string, from, slots int) (bool, error) {
	reset := false
	err := w.do(ctx, eventID, func(r *room, _ time.Time) error {
		if r.slots == from {
			r.slots, reset = slots, true
		}
		return nil
	})
	return reset, err
}

// Stats answers the room's numbers.
func (w *WaitingRoom) Stats(ctx context.Context, eventID string) (ports.RoomStats, error) {
	var s ports.RoomStats
	err := w.do(ctx, eventID, func(r *room, _ time.Time) error {
		s = ports.RoomStats{Waiting: len(r.waiting), Prequeued: len(r.pre), Admitted: len(r.admitted), Slots: r.slots,
			RemainingSlots: r.remaining(), RemainingSeats: r.seats, Claims: r.claims,
			Expired: r.expired, Dropped: r.dropped, Released: r.released, Connected: len(r.owners), SoldOut: r.soldOut,
			Gated: r.closed()}
		return nil
	})
	return s, err
}

// Events lists the events in use, sorted, after forgetting the rooms expired by now.
func (w *WaitingRoom) Events(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	for eventID := range w.emptied {
		w.live(eventID, now)
	}
	events := make([]string, 0, len(w.active))
	for id := range w.active {
		events = append(events, id)
	}
	sort.Strings(events)
	return events, nil
}

// SeatsLeft answers the seat counter.
func (w *WaitingRoom) SeatsLeft(ctx context.Context, eventID string) (int, error) {
	seats := 0
	err := w.do(ctx, eventID, func(r *room, _ time.Time) error {
		seats = r.seats
		return nil
	})
	return seats, err
}

// TakeSeat decrements the seat counter and answers it.
func (w *WaitingRoom) TakeSeat(ctx context.Context, eventID string) (int, error) {
	seats := 0
	err := w.do(ctx, eventID, func(r *room, _ time.Time) error {
		r.seats--
		seats = r.seats
		return nil
	})
	return seats, err
}

// MarkSoldOut marks the room sold out for good. See ports.SeatCounter.
func (w *WaitingRoom) MarkSoldOut(ctx context.Context, eventID string) error {
	return w.do(ctx, eventID, func(r *room, _ time.Time) error {
		r.soldOut, r.seats = true, 0
		for userID := range r.waiting {
			r.leave(userID)
		}
		return nil
	})
}

// ResetSeatsLeft sets the seat counter to seats if it still holds from.
func (w *WaitingRoom) ResetSeatsLeft(ctx context.Context, eventID string, from, seats int) (bool, error) {
	reset := false
	err := w.do(ctx, eventID, func(r *room, _ time.Time) error {
		if r.seats == from {
			r.seats, reset = seats, true
		}
		return nil
	})
	return reset, err
}

// remaining is slots minus the tokens alive, never below 0; 0 while the seat counter is, so
// nobody is admitted then (ports.WaitingRoom).
func (r *room) remaining() int {
	if r.seats <= 0 {
		return 0
	}
	return max(0, r.slots-len(r.admitted))
}

// rank is a waiting user's 0-based place.
func (r *room) rank(userID string) int { return r.order.prefix(r.waiting[userID] - 1) }

// leave takes a waiting or pre-queued user out of the queue.
func (r *room) leave(userID string) {
	if _, ok := r.pre[userID]; ok {
		delete(r.pre, userID)
		delete(r.seen, userID)
		return
	}
	seq, ok := r.waiting[userID]
	if !ok {
		return
	}
	delete(r.waiting, userID)
	delete(r.seen, userID)
	r.order.add(seq, -1, r.waiting)
	delete(r.predicted, userID)
}

// waited keeps the wait error of a user admitted at now, whose estimate it takes (a user who
// was given none leaves no error); call it before leave, which forgets the estimate.
func (r *room) waited(userID string, now time.Time) {
	p, ok := r.predicted[userID]
	if !ok {
		return
	}
	delete(r.predicted, userID)
	err := now.Sub(p.at) - time.Duration(p.seconds)*time.Second
	r.waits = append(r.waits, err)
	if len(r.waits) > ports.MaxWaitErrors {
		r.waits = r.waits[len(r.waits)-ports.MaxWaitErrors:]
	}
	if len(r.fresh) < ports.MaxWaitErrors {
		r.fresh = append(r.fresh, err)
	}
}

// Predict records each waiting user's first wait estimate. See ports.WaitPredictor.
func (w *WaitingRoom) Predict(ctx context.Context, eventID string, seconds map[string]int) error {
	return w.do(ctx, eventID, func(r *room, now time.Time) error {
		for userID, s := range seconds {
			if _, waiting := r.waiting[userID]; !waiting {
				continue
			}
			if _, ok := r.predicted[userID]; !ok {
				r.predicted[userID] = prediction{at: now, seconds: s}
			}
		}
		return nil
	})
}

// WaitErrors answers the wait errors kept, newest first as on Redis.
func (w *WaitingRoom) WaitErrors(ctx context.Context, eventID string) ([]time.Duration, error) {
	var out []time.Duration
	err := w.do(ctx, eventID, func(r *room, _ time.Time) error {
		out = slices.Clone(r.waits)
		slices.Reverse(out)
		return nil
	})
	return out, err
}

// prune gives back the slots of the tokens expired at now, each once, and answers how many.
func (r *room) prune(now time.Time) int {
	if len(r.admitted) == 0 || now.Before(r.earliest) {
		return 0
	}
	n := 0
	var earliest time.Time
	for userID, a := range r.admitted {
		if !now.Before(a.expiresAt) {
			delete(r.admitted, userID)
			r.expired++
			n++
			continue
		}
		if earliest.IsZero() || a.expiresAt.Before(earliest) {
			earliest = a.expiresAt
		}
	}
	r.earliest = earliest
	return n
}
