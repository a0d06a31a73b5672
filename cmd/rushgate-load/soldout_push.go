package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rushgate/rushgate/adapters/gormdb"
)

// soldout-push: soldout's sale in push mode, where the servers themselves must tell. --users SSE
// streams (held by stream client processes as queue-push's are) wait in ONE push event of
// --capacity seats and soldoutPushSlots slots, so most wait: the timed run opens them, each
// answered 200. Then the sale: each admitted stream's user reserves the next seat with the token
// its stream was sent, then leaves (its stream ends, its slot comes back), until the last seat's
// 201, the sold-out moment. Reported: the time to tell (sold-out moment → each never-admitted
// stream received `event: soldout` and the server ended it) p50/p99/max against two queue
// ticks. Invariant as soldout's: reservations == seats, no stream promoted after the sold-out
// moment, the room's promotions the same at the moment and at the end, every waiting stream
// told. The servers must run with RUSHGATE_RECONNECT_GRACE=0, as for queue-push. The ceiling is
// a bare GET /healthz.

// soldoutPushSlots keeps most streams waiting: the seats are sold a few admissions at a time.
const soldoutPushSlots = 10

func newSoldOutPush(cfg config) (scenario, error) {
	sc, err := newSoldOut(cfg)
	if err != nil {
		return nil, err
	}
	s := sc.(*soldOut)
	return &soldOutPush{soldOut: s, slots: min(soldoutPushSlots, s.seats), checkouts: make(chan pushCheckout, s.users)}, nil
}

// soldOutPush reuses soldout's event, reservation and checks; its users are streams.
type soldOutPush struct {
	*soldOut
	slots int

	// Set by prepare.
	clients *streamClients

	// checkouts are the admissions, in the order they arrived, for the sale to buy with.
	checkouts chan pushCheckout
	mu        sync.Mutex
	promoted  []time.Time // each stream's promotion (zero: not admitted)
	told      []time.Time // when each stream told sold out ended (zero: not told)
}

type pushCheckout struct {
	user  int
	token string
}

var _ scenario = (*soldOutPush)(nil)

func (s *soldOutPush) shape() string {
	return fmt.Sprintf("%d SSE streams → 1 push event of %d seats, %d slots, sold out", s.users, s.seats, s.slots)
}

func (s *soldOutPush) targets(gormdb.Dialect) []target {
	return []target{{measure: measureP99, bound: atMost, limit: 1000}}
}

// prepare creates the event, mints every user's token and starts the stream clients.
func (s *soldOutPush) prepare(ctx context.Context, e *env) error {
	err := s.createSale(ctx, e, map[string]any{
		"name": "rushgate-load push sold out " + e.runID, "seats": s.seats, "slots": s.slots, "mode": "push",
	}, s.users)
	if err != nil {
		return err
	}
	s.promoted, s.told = make([]time.Time, s.users), make([]time.Time, s.users)
	if s.clients, err = startStreamClients(s.users, e.timeout, s, e.stderr); err != nil {
		return fmt.Errorf("soldout-push: %w", err)
	}
	progress(e.stderr, "soldout-push: %d streams held by %d client processes\n", s.users, len(s.clients.procs))
	return nil
}

// run opens every stream; one succeeds when the server answers 200.
func (s *soldOutPush) run(e *env) work {
	return work{n: s.users, do: func(_ context.Context, i int) attempt {
		k, base := e.api.pick(i)
		a := s.clients.open(i, base+eventPath(s.eventID, "/tickets/waiting"), s.bearers[i]["Authorization"])
		a.instance = k
		return a
	}}
}

// The clients' reports (streamEvents).

func (s *soldOutPush) opened(int)                                  {}
func (s *soldOutPush) positions([]time.Duration)                   {}
func (s *soldOutPush) ranked(int, time.Time, int, time.Time)       {}
func (s *soldOutPush) ended(int, bool)                             {}
func (s *soldOutPush) soldout(i int, _ time.Time, ended time.Time) { s.note(s.told, i, ended) }

func (s *soldOutPush) admitted(i int, _ time.Duration, token string, promoted time.Time) {
	if s.note(s.promoted, i, promoted) {
		s.checkouts <- pushCheckout{user: i, token: token}
	}
}

// note sets stream i's first time in times; it answers whether it was the first.
func (s *soldOutPush) note(times []time.Time, i int, at time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !times[i].IsZero() {
		return false
	}
	times[i] = at
	return true
}

// invariant runs the sale, waits until every waiting stream was told, and checks it as soldout.
func (s *soldOutPush) invariant(ctx context.Context, e *env, attempts []attempt) (invariantResult, error) {
	defer s.clients.close()
	var res invariantResult
	var entered []int
	for i, a := range attempts {
		if a.ok {
			entered = append(entered, i)
		}
	}
	res.rows = append(res.rows, invariantRow{label: "streams opened (200)", value: len(entered)})
	if len(entered) != s.users {
		res.violations = append(res.violations, fmt.Sprintf("%d of %d streams were not answered 200", s.users-len(entered), s.users))
	}
	progress(e.stderr, "soldout-push: the sale, %d streams waiting in %d slots\n", len(entered), s.slots)
	sl := s.newSale(e)
	viewed := sl.watchSoldOut(ctx)
	stop := make(chan struct{})
	var buyers sync.WaitGroup
	for range s.slots {
		buyers.Go(func() {
			for {
				select {
				case c := <-s.checkouts:
					sl.reserveSeat(ctx, c.user, c.token)
					if err := s.clients.leave(c.user); err != nil {
						sl.fail("user %d leaving: %v", c.user, err)
					}
				case <-stop:
					return
				}
			}
		})
	}
	s.awaitTold(ctx, sl, entered)
	close(stop)
	buyers.Wait()
	viewed()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	s.mu.Lock()
	for _, i := range entered {
		if !s.promoted[i].IsZero() {
			sl.admitted[i] = true
			sl.rec.admittedSent = append(sl.rec.admittedSent, s.promoted[i])
		}
		sl.told[i] = s.told[i]
	}
	s.mu.Unlock()
	sl.settle(entered)
	end, err := s.queueView(ctx, e)
	if err != nil {
		return res, err
	}
	sl.rec.claimsAtEnd = end.Claims
	return res, sl.report(ctx, end, &res)
}

// awaitTold waits until the last seat is sold and every stream never admitted was told, within
// soldout's budgets.
func (s *soldOutPush) awaitTold(ctx context.Context, sl *sale, entered []int) {
	start := time.Now()
	for ; ctx.Err() == nil; time.Sleep(20 * time.Millisecond) {
		sl.mu.Lock()
		soldOutAt := sl.rec.soldOutAt
		sl.mu.Unlock()
		if soldOutAt.IsZero() {
			if time.Since(start) > soldoutSaleBudget {
				return
			}
			continue
		}
		s.mu.Lock()
		waiting := 0
		for _, i := range entered {
			if s.promoted[i].IsZero() && s.told[i].IsZero() {
				waiting++
			}
		}
		s.mu.Unlock()
		if waiting == 0 || time.Since(soldOutAt) > soldoutTellBudget {
			return
		}
	}
}
