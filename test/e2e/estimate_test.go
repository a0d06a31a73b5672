package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/test/testkit"
)

// estimateOf reads estimatedWaitSeconds from an answer's data, which must carry the field: nil
// for null, and otherwise a whole number within the estimate's bounds.
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
			testkit.Eventually(t, bound, "first push user admitted", first.isAdmitted)
			next := s.openStream(push, "push-next")
			third := s.openStream(push, "push-third")
			testkit.Eventually(t, bound, "push users waiting", func() error { return third.isAtRank(1) })

			// An admission counts once a reconciliation pass has measured before it: a known
			// admissionRate says two have.
			for _, eventID := range []string{pull, push} {
				testkit.Eventually(t, bound, "admission rate measured", func() error {
					if v := s.queueView(eventID); v.body["admissionRate"] == nil {
						return fmt.Errorf("no admission rate in %s", v.raw)
					}
					return nil
				})
			}
			if res := s.claim(pull, "pull-holder"); res.status != http.StatusCreated {
				t.Fatalf("claim: %d %s", res.status, res.raw)
			}
			first.close() // push-next is admitted and keeps its slot
			testkit.Eventually(t, bound, "second push user admitted", next.isAdmitted)

			pullStatus := func() response {
				res := s.queueStatus(pull, "pull-next")
				if res.status != http.StatusOK || res.str("status") != "waiting" || res.num("rank") != 0 || res.num("aheadCount") != 1 {
					t.Fatalf("pull status: %d %s, want waiting at rank 0 with one admission ahead", res.status, res.raw)
				}
				return res
			}
			testkit.Eventually(t, bound, "pull estimate known", func() error {
				if res := pullStatus(); estimateOf(t, "pull status", res.body) == nil {
					return fmt.Errorf("no estimate in %s", res.raw)
				}
				return nil
			})
			testkit.Eventually(t, bound, "push estimate known", func() error {
				if p := third.lastPosition(); p["rank"] != 0.0 || p["aheadCount"] != 1.0 || estimateOf(t, "push position", p) == nil {
					return fmt.Errorf("position %v, want rank 0, 1 ahead and an estimate", p)
				}
				return nil
			})

			clock.advance(waiting.RateWindow + time.Second)
			testkit.Eventually(t, bound, "pull estimate null after a minute without admission", func() error {
				if res := pullStatus(); estimateOf(t, "pull status", res.body) != nil {
					return fmt.Errorf("an estimate in %s", res.raw)
				}
				return nil
			})
			testkit.Eventually(t, bound, "push estimate null after a minute without admission", func() error {
				if p := third.lastPosition(); p["rank"] != 0.0 || p["aheadCount"] != 1.0 || estimateOf(t, "push position", p) != nil {
					return fmt.Errorf("position %v, want rank 0, 1 ahead and no estimate", p)
				}
				return nil
			})
			testkit.Eventually(t, bound, "a measured admission rate of 0", func() error {
				if v := s.queueView(pull); v.body["admissionRate"] != 0.0 {
					return fmt.Errorf("admission rate %v in %s", v.body["admissionRate"], v.raw)
				}
				return nil
			})
		})
	}
}

// TestPush_WaitAccuracyCountsPushAdmissions: a push user who was shown an estimate and is then
// admitted is a sample of the operators' wait accuracy, with its errors, on every
// backend; the application tests check the numbers on a controlled clock.
func TestPush_WaitAccuracyCountsPushAdmissions(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b, pushConfig(0))
			// bound is a few reconciliation and broadcast ticks, with room for a loaded machine.
			bound := 50 * pushTick
			eventID := s.createEvent(`{"name":"push accuracy","seats":10,"slots":1,"mode":"push"}`)
			first := s.openStream(eventID, "accuracy-first")
			testkit.Eventually(t, bound, "first admitted", first.isAdmitted)
			next := s.openStream(eventID, "accuracy-next")
			third := s.openStream(eventID, "accuracy-third")
			testkit.Eventually(t, bound, "two waiting", func() error { return third.isAtRank(1) })
			testkit.Eventually(t, bound, "admission rate measured", func() error {
				if v := s.queueView(eventID); v.body["admissionRate"] == nil {
					return fmt.Errorf("no admission rate in %s", v.raw)
				}
				return nil
			})
			first.close()
			testkit.Eventually(t, bound, "next admitted", next.isAdmitted)
			testkit.Eventually(t, bound, "an estimate shown to the third", func() error {
				if p := third.lastPosition(); p["rank"] != 0.0 || estimateOf(t, "push position", p) == nil {
					return fmt.Errorf("position %v, want rank 0 and an estimate", p)
				}
				return nil
			})
			next.close()
			testkit.Eventually(t, bound, "third admitted", third.isAdmitted)
			testkit.Eventually(t, bound, "a wait accuracy sample", func() error {
				v := s.queueView(eventID)
				accuracy, _ := v.body["waitAccuracy"].(map[string]any)
				if samples, _ := accuracy["samples"].(float64); samples < 1 || accuracy["medianErrorSeconds"] == nil {
					return fmt.Errorf("wait accuracy in %s", v.raw)
				}
				return nil
			})
		})
	}
}
