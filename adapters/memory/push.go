package memory

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rushgate/rushgate/ports"
)

var _ ports.PushQueue = (*WaitingRoom)(nil)

// stream is an in-process stream read by one consumer group: messages in order, each delivered
// to one consumer until acknowledged, reclaimable by another once idle long enough.
type stream struct {
	seq  int
	msgs []streamMessage
	// added is closed and replaced on every append, waking blocked readers.
	added chan struct{}
}

type streamMessage struct {
	p           ports.Promotion
	delivered   bool
	consumer    string
	deliveredAt time.Time
}

func newStream() *stream { return &stream{added: make(chan struct{})} }

func (s *stream) append(p ports.Promotion) {
	s.seq++
	p.MessageID = strconv.Itoa(s.seq)
	s.msgs = append(s.msgs, streamMessage{p: p})
	close(s.added)
	s.added = make(chan struct{})
}

// read reclaims up to count messages delivered at least reclaimIdle ago (when positive), then
// delivers new ones, all to consumer.
func (s *stream) read(consumer string, count int, reclaimIdle time.Duration, now time.Time) []ports.Promotion {
	var out []ports.Promotion
	for pass := range 2 {
		for i := range s.msgs {
			m := &s.msgs[i]
			if len(out) == count {
				return out
			}
			reclaim := pass == 0 && reclaimIdle > 0 && m.delivered && now.Sub(m.deliveredAt) >= reclaimIdle
			if reclaim || (pass == 1 && !m.delivered) {
				m.delivered, m.consumer, m.deliveredAt = true, consumer, now
				p := m.p
				p.Reclaimed = reclaim
				out = append(out, p)
			}
		}
	}
	return out
}

func (s *stream) ack(messageIDs []string) {
	acked := make(map[string]bool, len(messageIDs))
	for _, id := range messageIDs {
		acked[id] = true
	}
	s.msgs = slices.DeleteFunc(s.msgs, func(m streamMessage) bool { return acked[m.p.MessageID] })
}

// Connect enters the user and makes owner the user's connection.
func (w *WaitingRoom) Connect(ctx context.Context, eventID, userID, owner string) (ports.QueuePlace, error) {
	var place ports.QueuePlace
	// One critical section, as one script on Redis: a promotion never sees the user queued
	// without an owner to route the admission to.
	err := w.do(ctx, eventID, func(r *room, now time.Time) error {
		if r.soldOut {
			return ports.ErrSoldOut
		}
		w.keep(eventID, r)
		held, ok := r.owners[userID]
		if !ok || ports.Supersedes(owner, held) {
			r.owners[userID] = owner
			if ok && held != owner {
				place.Replaced = held
			}
		}
		replaced := place.Replaced
		place = r.enter(userID, now)
		place.Replaced = replaced
		return nil
	})
	return place, err
}

// TellReplaced appends a Replaced message to the dispatch stream of owner's broker, if it has
// one.
func (w *WaitingRoom) TellReplaced(ctx context.Context, eventID, userID, owner string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.dispatch[ports.OwnerBroker(owner)]; s != nil {
		s.append(ports.Promotion{EventID: eventID, UserID: userID, Owner: owner, Replaced: true})
	}
	return nil
}

// Disconnect applies the disconnect rule if owner, or an older connection it covers, holds the
// user.
func (w *WaitingRoom) Disconnect(ctx context.Context, eventID, userID, owner string) (ports.Departure, error) {
	departed := ports.Stayed
	err := w.do(ctx, eventID, func(r *room, _ time.Time) error {
		if held, ok := r.owners[userID]; ok && ports.Covers(owner, held) {
			departed = r.depart(userID)
		}
		return nil
	})
	return departed, err
}

// depart removes the user's owner and applies the disconnect rule.
func (r *room) depart(userID string) ports.Departure {
	delete(r.owners, userID)
	delete(r.predicted, userID)
	if _, ok := r.admitted[userID]; ok {
		delete(r.admitted, userID)
		r.released++
		return ports.Released
	}
	if r.queued(userID) {
		r.leave(userID)
		return ports.Removed
	}
	return ports.Stayed
}

// Snapshot answers the waiting line.
func (w *WaitingRoom) Snapshot(ctx context.Context, eventID string) (ports.QueueSnapshot, error) {
	var snap ports.QueueSnapshot
	err := w.do(ctx, eventID, func(r *room, _ time.Time) error {
		if r.closed() {
			snap.Prequeue = true
			return nil
		}
		snap.Waiting, snap.RemainingSlots, snap.SoldOut = r.line(), r.remaining(), r.soldOut
		return nil
	})
	return snap, err
}

// line is the waiting users in order of entry.
func (r *room) line() []string {
	users := make([]string, 0, len(r.waiting))
	for u := range r.waiting {
		users = append(users, u)
	}
	slices.SortFunc(users, func(a, b string) int { return r.waiting[a] - r.waiting[b] })
	return users
}

// Promote moves the head into the admitted set and the entry stream, then acknowledges and
// reads entries as ReadEntries does, in the same critical section.
func (w *WaitingRoom) Promote(ctx context.Context, eventID string, ttl time.Duration, read ports.EntryRead) (int, []ports.Promotion, error) {
	n := 0
	var out []ports.Promotion
	err := w.do(ctx, eventID, func(r *room, now time.Time) error {
		n = r.promote(eventID, ttl, now)
		out = r.readEntries(read, now)
		return nil
	})
	return n, out, err
}

// promote moves up to the remaining slots' worth of users from the head into the admitted set
// and the entry stream, and answers how many.
func (r *room) promote(eventID string, ttl time.Duration, now time.Time) int {
	left := r.remaining()
	if left == 0 || len(r.waiting) == 0 || r.closed() {
		return 0
	}
	head := r.line()
	head = head[:min(left, len(head))]
	expiresAt := now.Add(ttl)
	for _, user := range head {
		r.waited(user, now)
		r.leave(user)
		r.admitted[user] = admission{expiresAt: expiresAt}
		r.entry.append(ports.Promotion{EventID: eventID, UserID: user, PromotedAt: now})
	}
	if len(r.admitted) == len(head) || expiresAt.Before(r.earliest) {
		r.earliest = expiresAt
	}
	r.claims += int64(len(head))
	return len(head)
}

// ReadEntries acknowledges the routed entries, reclaims entries idle past read.ReclaimIdle,
// then reads new ones, each with its user's connection owner.
func (w *WaitingRoom) ReadEntries(ctx context.Context, eventID string, read ports.EntryRead) ([]ports.Promotion, error) {
	var out []ports.Promotion
	err := w.do(ctx, eventID, func(r *room, now time.Time) error {
		out = r.readEntries(read, now)
		return nil
	})
	return out, err
}

func (r *room) readEntries(read ports.EntryRead, now time.Time) []ports.Promotion {
	r.entry.ack(read.Routed)
	if read.Count <= 0 {
		return nil
	}
	out := r.entry.read(read.Consumer, read.Count, read.ReclaimIdle, now)
	for i := range out {
		out[i].Owner = r.owners[out[i].UserID]
	}
	return out
}

// dispatchStream is brokerID's dispatch stream, created on first use; under w.mu.
func (w *WaitingRoom) dispatchStream(brokerID string) *stream {
	s := w.dispatch[brokerID]
	if s == nil {
		s = newStream()
		w.dispatch[brokerID] = s
	}
	return s
}

// Dispatch appends each promotion with an owner to its broker's dispatch stream.
func (w *WaitingRoom) Dispatch(ctx context.Context, promotions []ports.Promotion) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range promotions {
		if p.Owner != "" {
			brokerID := ports.OwnerBroker(p.Owner)
			p.Owner, p.MessageID, p.Reclaimed = "", "", false
			w.dispatchStream(brokerID).append(p)
		}
	}
	return nil
}

// ReadDispatch retries the broker's unacknowledged messages (when retryAfter is positive), then
// reads new ones, waiting up to block for one.
func (w *WaitingRoom) ReadDispatch(ctx context.Context, brokerID string, count int, block, retryAfter time.Duration) ([]ports.Promotion, error) {
	timer := time.NewTimer(block)
	defer timer.Stop()
	for {
		w.mu.Lock()
		s := w.dispatchStream(brokerID)
		out := s.read(brokerID, count, retryAfter, w.clock.Now())
		added := s.added
		w.mu.Unlock()
		if len(out) > 0 || block <= 0 {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return nil, nil
		case <-added:
		}
	}
}

// AckDispatch acknowledges and deletes dispatch messages.
func (w *WaitingRoom) AckDispatch(ctx context.Context, brokerID string, messageIDs []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(messageIDs) == 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dispatchStream(brokerID).ack(messageIDs)
	return nil
}

// Issue gives each admitted user of the grants the token already issued, or the grant's, and
// acknowledges ack's dispatch messages.
func (w *WaitingRoom) Issue(ctx context.Context, eventID string, grants []ports.TokenGrant, ttl time.Duration, ack ports.DispatchAck) ([]ports.ClaimResult, error) {
	results := make([]ports.ClaimResult, len(grants))
	err := w.do(ctx, eventID, func(r *room, now time.Time) error {
		for i, g := range grants {
			a, ok := r.admitted[g.UserID]
			if !ok {
				continue
			}
			res := &results[i]
			res.Created = a.token == ""
			if res.Created {
				a.token = g.Token
			}
			a.expiresAt = now.Add(ttl)
			r.admitted[g.UserID] = a
			res.Claimed, res.Token, res.ExpiresAt = true, a.token, a.expiresAt
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := w.AckDispatch(ctx, ack.BrokerID, ack.MessageIDs); err != nil {
		return nil, err
	}
	return results, nil
}

// Heartbeat marks the broker alive for ttl and answers whether its last heartbeat still was.
func (w *WaitingRoom) Heartbeat(ctx context.Context, brokerID string, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	until, known := w.brokers[brokerID]
	w.brokers[brokerID] = now.Add(ttl)
	return known && now.Before(until), nil
}

// DeadBrokers lists the brokers whose heartbeat lapsed.
func (w *WaitingRoom) DeadBrokers(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	var dead []string
	for b, until := range w.brokers {
		if !now.Before(until) {
			dead = append(dead, b)
		}
	}
	slices.Sort(dead)
	return dead, nil
}

// ReapBroker reclaims a dead broker's messages and users and forgets it.
func (w *WaitingRoom) ReapBroker(ctx context.Context, brokerID string, events []string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	prefix := brokerID + "|"
	freed := 0
	depart := func(r *room, userID string) {
		if held, ok := r.owners[userID]; ok && strings.HasPrefix(held, prefix) && r.depart(userID) == ports.Released {
			freed++
		}
	}
	if s := w.dispatch[brokerID]; s != nil {
		for _, m := range s.msgs {
			if r := w.rooms[m.p.EventID]; r != nil {
				depart(r, m.p.UserID)
			}
		}
	}
	for _, eventID := range events {
		if r := w.rooms[eventID]; r != nil {
			for userID := range r.owners {
				depart(r, userID)
			}
		}
	}
	delete(w.dispatch, brokerID)
	delete(w.brokers, brokerID)
	return freed, nil
}
