package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/test/testkit"
)

// soldOutBound is how long a test waits for every waiting user to hear that the event sold out:
// a few queue ticks (pushTick) and reconciliation passes, with room for a loaded machine.
const soldOutBound = 20 * time.Second

// pullSoldOut: many users race through a pull queue with few seats — each claims until
// admitted, reserves the first seat it can, and gives its token back so the next is admitted
// (one who got no seat enters again).
// Once the last seat is gone every user hears SOLD_OUT (claim) or soldout (status); no claim
// that started after anyone was told is admitted; entering answers 409 SOLD_OUT; the database
// holds one reservation per seat, no more than the seats.
func pullSoldOut(t *testing.T, s *server, users, seats int) {
	eventID := s.createEvent(fmt.Sprintf(`{"name":"sold out","seats":%d,"slots":2,"mode":"pull"}`, seats))
	var told, lateClaims, reserved atomic.Int32
	_, _ = fire(users, func(i int) response {
		user := fmt.Sprintf("buyer-%d", i)
		if res := s.enter(eventID, user); res.status != http.StatusCreated {
			t.Errorf("enter %s: %d %s", user, res.status, res.raw)
			return res
		}
		for {
			startedAfterTold := told.Load() > 0
			res := s.claim(eventID, user)
			switch {
			case res.status == http.StatusConflict && res.str("error") == "SOLD_OUT":
				told.Add(1)
				return res
			case res.status == http.StatusConflict && res.str("error") == "NOT_READY":
				if st := s.queueStatus(eventID, user); st.status == http.StatusOK && st.str("status") == "soldout" {
					told.Add(1)
					return st
				}
				time.Sleep(20 * time.Millisecond)
				continue
			case res.status != http.StatusCreated && res.status != http.StatusOK:
				t.Errorf("claim %s: %d %s", user, res.status, res.raw)
				return res
			}
			if startedAfterTold {
				lateClaims.Add(1)
			}
			booked := false
			for seat := 1; seat <= seats && !booked; seat++ {
				r := s.reserve(eventID, fmt.Sprint(seat), user, res.str("token"))
				booked = r.status == http.StatusCreated
				if r.status == http.StatusConflict && r.str("error") == "SOLD_OUT" {
					break
				}
			}
			if r := s.giveBack(eventID, user); r.status != http.StatusNoContent {
				t.Errorf("give back %s: %d %s", user, r.status, r.raw)
			}
			if booked {
				reserved.Add(1)
				return res
			}
			// No seat this time: back into the line, unless it sold out meanwhile.
			if r := s.enter(eventID, user); r.status == http.StatusConflict && r.str("error") == "SOLD_OUT" {
				told.Add(1)
				return r
			} else if r.status != http.StatusCreated {
				t.Errorf("enter %s again: %d %s", user, r.status, r.raw)
				return r
			}
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	if got := reserved.Load(); got != int32(seats) {
		t.Fatalf("%d reservations answered 201, want %d", got, seats)
	}
	if n := lateClaims.Load(); n != 0 {
		t.Fatalf("%d claims admitted after a user was told the event sold out", n)
	}
	if n := told.Load(); n < int32(users-seats) {
		t.Fatalf("%d users told sold out, want at least %d", n, users-seats)
	}
	for i := range users {
		res := s.queueStatus(eventID, fmt.Sprintf("buyer-%d", i))
		if res.status != http.StatusOK || res.str("status") != "soldout" || len(res.body) != 1 {
			t.Fatalf("status of buyer-%d after sold out: %d %s", i, res.status, res.raw)
		}
	}
	assertError(t, s.enter(eventID, "latecomer"), http.StatusConflict, "SOLD_OUT")
	assertError(t, s.claim(eventID, "buyer-0"), http.StatusConflict, "SOLD_OUT")
	view := s.queueView(eventID)
	if view.num("waiting") != 0 || view.num("remainingSeats") != 0 || view.body["soldOut"] != true {
		t.Fatalf("queue view after sold out: %s", view.raw)
	}
	if st := s.seatState(eventID, seats); st.reservations != seats || st.distinctSeats != seats || st.reservedSeats != seats {
		t.Fatalf("invariant broken: %+v", st)
	}
}

// pushSoldOut: streams wait behind the admitted users; once those reserve the last seats every
// waiting stream receives `event: soldout` and ends, within a few ticks; no stream is admitted
// after that; a new stream answers 409 SOLD_OUT; the database holds one reservation per seat.
func pushSoldOut(t *testing.T, s *server, users, seats int) {
	eventID := s.createEvent(fmt.Sprintf(`{"name":"sold out","seats":%d,"mode":"push"}`, seats))
	streams := make([]*sseClient, users)
	for i := range users {
		streams[i] = s.openStream(eventID, fmt.Sprintf("fan-%d", i))
	}
	for i := range seats {
		testkit.Eventually(t, soldOutBound, "the head is admitted", streams[i].isAdmitted)
	}
	fire(seats, func(i int) response {
		res := s.reserve(eventID, fmt.Sprint(i+1), fmt.Sprintf("fan-%d", i), streams[i].token())
		if res.status != http.StatusCreated {
			t.Errorf("reserve seat %d: %d %s", i+1, res.status, res.raw)
		}
		return res
	})
	testkit.Eventually(t, soldOutBound, "every waiting stream told sold out and ended", func() error {
		for _, c := range streams[seats:] {
			c.mu.Lock()
			told := c.soldOut
			c.mu.Unlock()
			if !told {
				return fmt.Errorf("%s not told, last position %v", c.user, c.lastPosition())
			}
			select {
			case <-c.ended:
			default:
				return errors.New(c.user + " told but its stream is still open")
			}
		}
		return nil
	})
	for _, c := range streams[seats:] {
		if c.token() != "" {
			t.Fatalf("%s admitted to a sold-out event", c.user)
		}
	}
	if status, _ := openStream(t, s.url, eventID, "latecomer", s.token("latecomer")); status != http.StatusConflict {
		t.Fatalf("stream into a sold-out event: %d, want 409", status)
	}
	assertError(t, s.do("POST", "/events/"+eventID+"/queue", s.token("latecomer"), ""), http.StatusConflict, "WRONG_ADMISSION_MODE")
	if st := s.seatState(eventID, seats); st.reservations != seats || st.distinctSeats != seats || st.reservedSeats != seats {
		t.Fatalf("invariant broken: %+v", st)
	}
}

func TestSoldOut_PullTellsEveryWaitingUserAndAdmitsNobodyAfter(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			pullSoldOut(t, startServer(t, b), 60, 5)
		})
	}
}

func TestSoldOut_PushEndsEveryWaitingStream(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			pushSoldOut(t, startServer(t, b, pushConfig(0)), 40, 3)
		})
	}
}
