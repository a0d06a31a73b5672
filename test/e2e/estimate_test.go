package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/domain/waiting"
)

// estimateOf reads estimatedWaitSeconds from an answer's data, which must carry the field: nil
// for null, and otherwise a whole number within SPEC §3's bounds.
func estimateOf(t *testing.T, what string, data map[string]any) *int {
	t.Helper()
	raw, ok := data["estimatedWaitSeconds"]
	if !ok {
		t.Fatalf("%s: no estimatedWaitSeconds in %v", what, data)
	}
	if raw == nil {
		return nil
	}
	n, ok := raw.(float64)
	if !ok || n != float64(int(n)) || n < 0 || n > waiting.MaxEstimatedWait.Seconds() {
		t.Fatalf("%s: estimatedWaitSeconds %v is not a whole number of seconds within a day", what, raw)
	}
	seconds := int(n)
	return &seconds
}

// TestWaiting_EstimateIsNullAMinuteAfterTheLastAdmission: the sold-out rush of issue 17 on
// every backend. One admission in pull mode and one in push mode, then every slot stays held:
// the waiting users' estimates are known, sane numbers; once the server's clock has moved
// past the rate's minute, pull status answers and push positions carry null, not a negative
// number.
func TestWaiting_EstimateIsNullAMinuteAfterTheLastAdmission(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock := &shiftedClock{}
			s := startServerOnClock(t, b, clock,
				pushConfig(0), func(c *bootstrap.Config) {
					// The jump must not make this broker look dead (the memory backend's
					// heartbeats run on the same clock).
					c.Queue.BrokerHeartbeatTimeout = 10 * time.Minute
				})
			// bound is how long a change takes to show: a few reconciliation and broadcast
			// ticks, with room for a loaded machine.
			bound := 50 * pushTick
			pull := s.createEvent(`{"name":"held pull","seats":10,"slots":1,"mode":"pull"}`)
			push := s.createEvent(`{"name":"held push","seats":10,"slots":1,"mode":"push"}`)

			for _, u := range []string{"pull-holder", "pull-next"} {
				if res := s.enter(pull, u); res.status != http.StatusCreated {
					t.Fatalf("enter %s: %d %s", u, res.status, res.raw)
				}
			}
			first := s.openStream(push, "push-first")
			eventually(t, bound, "first push user admitted", func() bool { return first.token() != "" })
			next := s.openStream(push, "push-next")
			third := s.openStream(push, "push-third")
			eventually(t, bound, "push users waiting", func() bool { return third.lastRank() == 1 })

			// An admission counts once a reconciliation pass has measured before it: a known
			// admissionRate says two have.
			for _, eventID := range []string{pull, push} {
				eventually(t, bound, "admission rate measured", func() bool {
					return s.queueView(eventID).body["admissionRate"] != nil
				})
			}
			if res := s.claim(pull, "pull-holder"); res.status != http.StatusCreated {
				t.Fatalf("claim: %d %s", res.status, res.raw)
			}
			first.close() // push-next is admitted and keeps its slot
			eventually(t, bound, "second push user admitted", func() bool { return next.token() != "" })

			pullStatus := func() response {
				res := s.queueStatus(pull, "pull-next")
				if res.status != http.StatusOK || res.str("status") != "waiting" || res.num("rank") != 0 || res.num("aheadCount") != 1 {
					t.Fatalf("pull status: %d %s, want waiting at rank 0 with one admission ahead", res.status, res.raw)
				}
				return res
			}
			eventually(t, bound, "pull estimate known", func() bool {
				return estimateOf(t, "pull status", pullStatus().body) != nil
			})
			eventually(t, bound, "push estimate known", func() bool {
				p := third.lastPosition()
				return p["rank"] == 0.0 && p["aheadCount"] == 1.0 && estimateOf(t, "push position", p) != nil
			})

			clock.advance(waiting.RateWindow + time.Second)
			eventually(t, bound, "pull estimate null after a minute without admission", func() bool {
				return estimateOf(t, "pull status", pullStatus().body) == nil
			})
			eventually(t, bound, "push estimate null after a minute without admission", func() bool {
				p := third.lastPosition()
				return p["rank"] == 0.0 && p["aheadCount"] == 1.0 && estimateOf(t, "push position", p) == nil
			})
			eventually(t, bound, "a measured admission rate of 0", func() bool {
				return s.queueView(pull).body["admissionRate"] == 0.0
			})
		})
	}
}
