package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

// stallTicks bounds, in queue ticks (pushTick), how long after a stalled broker or dispatcher
// resumes its users may wait before they are accounted for: admitted, told their place, or
// disconnected.
const stallTicks = 10

// received is how many positions and admissions the stream delivered.
func (c *sseClient) received() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.positions) + len(c.admitted)
}

func (c *sseClient) isEnded() bool {
	select {
	case <-c.ended:
		return true
	default:
		return false
	}
}

// metric sums the samples of the Prometheus metric name (every label set) on p's /metrics.
func (p *process) metric(t *testing.T, name string) float64 {
	t.Helper()
	return metricAt(t, p.url, name)
}

// metricAt sums the samples of the Prometheus metric name (every label set) on the /metrics of
// the server at baseURL.
func metricAt(t *testing.T, baseURL, name string) float64 {
	t.Helper()
	res, err := http.Get(baseURL + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", baseURL, err)
	}
	defer res.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "{")) {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			sum += v
		}
	}
	return sum
}

// TestPush_StalledBrokerLeavesNobodyOnASilentStream: broker A holds two admitted and two waiting
// users and is frozen (SIGSTOP) past the heartbeat timeout, so the dispatcher reaps it: their
// slots come back (broker B's user gets one). When A resumes (SIGCONT) it learns from its
// heartbeat that it lapsed and ends all four streams within stallTicks ticks, logging and
// counting it. The clients reconnect to A and are queued again (the reaped admissions are
// gone, their tokens refused), and the reaping of A's old id that follows leaves them there.
func TestPush_StalledBrokerLeavesNobodyOnASilentStream(t *testing.T) {
	for _, db := range processDatabases {
		t.Run(db.name, func(t *testing.T) {
			env := append(processEnv(t, db.fresh(t).URL), "RUSHGATE_RECONNECT_GRACE=1s")
			dispatcher := startProcess(t, env, "dispatcher", "dispatcher")
			procA := startProcess(t, env, "broker-a", "broker")
			a, b := procA.client(t), startProcess(t, env, "broker-b", "broker").client(t)
			eventID := a.createEvent(`{"name":"stalled broker","seats":10,"slots":2,"mode":"push"}`)

			users := make([]string, 4)
			streams := make([]*sseClient, len(users))
			var slack time.Duration
			for i := range users {
				users[i] = fmt.Sprintf("stall-a%d-%s", i, a.run)
				opened := time.Now()
				streams[i] = a.openStream(eventID, users[i])
				if i < 2 {
					testkit.Eventually(t, stallSetupWait, users[i]+" admitted", streams[i].isAdmitted)
				}
				if i == 0 {
					slack = admissionSlack(t, opened)
				}
			}
			oldTokens := []string{streams[0].token(), streams[1].token()}
			onB := b.openStream(eventID, "stall-b-"+a.run)
			testkit.Eventually(t, stallSetupWait, "B's user waits behind A's", func() error { return onB.isAtRank(2) })

			procA.freeze(t)
			t.Cleanup(procA.thaw)
			testkit.Eventually(t, processHeartbeatTimeout+20*pushTick+slack, "A reaped and B's user admitted", func() error {
				return errors.Join(b.queueView(eventID).hasNums(map[string]int{"connections": 1, "waiting": 0, "admitted": 1}), onB.isAdmitted())
			})
			before := make([]int, len(streams))
			for i, c := range streams {
				if c.isEnded() {
					t.Fatalf("%s: stream ended while its broker was frozen", c.user)
				}
				before[i] = c.received()
			}

			procA.thaw()
			thawed := time.Now()
			accounted := make([]time.Duration, len(streams))
			testkit.Eventually(t, stallTicks*pushTick+slack, "every client of the resumed broker is accounted for", func() error {
				var silent []string
				for i, c := range streams {
					if accounted[i] == 0 && (c.isEnded() || c.received() > before[i]) {
						accounted[i] = time.Since(thawed)
					}
					if accounted[i] == 0 {
						silent = append(silent, c.user)
					}
				}
				if len(silent) > 0 {
					return fmt.Errorf("no word yet to %v", silent)
				}
				return nil
			})
			worst := slices.Max(accounted)
			t.Logf("every client of the resumed broker accounted for within %v = %.1f ticks of %v (each: %v)",
				worst.Round(time.Millisecond), float64(worst)/float64(pushTick), pushTick, accounted)
			for _, c := range streams {
				if !c.isEnded() {
					t.Errorf("%s: the reaped broker kept the stream open", c.user)
				}
			}
			if got := procA.metric(t, "rushgate_queue_broker_lapses_total"); got != 1 {
				t.Errorf("broker lapses counted %v, want 1", got)
			}
			if got := procA.metric(t, "rushgate_queue_broker_lapse_streams_ended_total"); got != float64(len(streams)) {
				t.Errorf("streams ended on the lapse counted %v, want %d", got, len(streams))
			}

			// The clients reconnect, to the resumed broker, in their order: the one free slot
			// goes to the first, the others are told their place.
			reaps := dispatcher.metric(t, "rushgate_queue_brokers_reaped_total")
			for i := range streams {
				streams[i] = a.openStream(eventID, users[i])
			}
			testkit.Eventually(t, stallTicks*pushTick+slack, "the reconnected clients admitted or told their place", func() error {
				return errors.Join(streams[0].isAdmitted(), streams[1].isAtRank(0), streams[2].isAtRank(1), streams[3].isAtRank(2))
			})
			if streams[0].token() == oldTokens[0] {
				t.Fatal("a reaped admission's token came back")
			}
			for i, token := range oldTokens {
				if res := b.reserve(eventID, "1", users[i], token); res.status != http.StatusForbidden {
					t.Fatalf("%s's reaped token reserves: %d %s", users[i], res.status, res.raw)
				}
			}
			// A's old id beat once more on resuming; once that lapses too it is reaped again,
			// which must leave the users A now holds under its new id where they are.
			testkit.Eventually(t, processHeartbeatTimeout+20*pushTick+slack, "A's old id reaped again", func() error {
				if reaped := dispatcher.metric(t, "rushgate_queue_brokers_reaped_total"); reaped <= reaps {
					return fmt.Errorf("%v brokers reaped", reaped)
				}
				return nil
			})
			if v := b.queueView(eventID); v.num("connections") != 5 || v.num("admitted") != 2 || v.num("waiting") != 3 {
				t.Fatalf("after A's old id was reaped again: %s", v.raw)
			}
			// Admission goes on: B's user leaves, the next of A's is admitted.
			onB.close()
			testkit.Eventually(t, processHeartbeatTimeout+stallTicks*pushTick+slack, users[1]+" admitted", streams[1].isAdmitted)
		})
	}
}

// stallSetupWait bounds the steps that set a stall up or check its aftermath (admissions, slots
// coming back): not what the tests measure, so roomy enough for a runner shared with other jobs.
const stallSetupWait = 15 * time.Second

// admissionSlack is what the processes themselves take to admit a user on this machine
// (stream, promotion, routing, token; CPU and scheduling on a loaded runner), measured on a
// healthy admission whose stream opened at opened: no wait on a stall, so the stall bounds
// allow it on top of their ticks. Capped at the ticks' own allowance, so a bound stays well
// short of what a missed reap or takeover would take.
func admissionSlack(t *testing.T, opened time.Time) time.Duration {
	took := time.Since(opened)
	slack := min(took, stallTicks*pushTick)
	t.Logf("a healthy admission took %v: slack %v on every stall bound", took.Round(time.Millisecond), slack.Round(time.Millisecond))
	return slack
}

// TestPush_StalledDispatcherResumesAndAnotherTakesOver: with the only dispatcher frozen
// (SIGSTOP) nobody is admitted though slots are free; once it resumes (SIGCONT) admission goes
// on within stallTicks ticks, and the stall is counted. Entries a stalled dispatcher read and
// never acknowledged are routed by another after the heartbeat timeout. Then the first is
// frozen past the heartbeat timeout again and again while the second runs and admitted users
// leave at once: every user is admitted exactly once with one token, never more than the slots
// at once, and every slot is back at the end.
func TestPush_StalledDispatcherResumesAndAnotherTakesOver(t *testing.T) {
	for _, db := range processDatabases {
		t.Run(db.name, func(t *testing.T) {
			env := processEnv(t, db.fresh(t).URL)
			broker := startProcess(t, env, "broker", "broker").client(t)
			first := startProcess(t, env, "dispatcher-1", "dispatcher")
			const users, slots = 48, 3
			eventID := broker.createEvent(fmt.Sprintf(`{"name":"stalled dispatcher","seats":%d,"slots":%d,"mode":"push"}`, users, slots))
			clients := make([]*sseClient, users)
			open := func(from, to int) {
				for i := from; i < to; i++ {
					clients[i] = broker.openStream(eventID, fmt.Sprintf("sd-%s%d", broker.run, i))
				}
			}
			opened := time.Now()
			open(0, slots)
			testkit.Eventually(t, stallSetupWait, "the first wave admitted", func() error {
				return errors.Join(clients[0].isAdmitted(), clients[1].isAdmitted(), clients[2].isAdmitted())
			})
			slack := admissionSlack(t, opened)
			open(slots, users)

			first.freeze(t)
			t.Cleanup(first.thaw)
			for _, c := range clients[:slots] {
				c.close()
			}
			testkit.Eventually(t, stallSetupWait, "the slots come back", func() error {
				return broker.queueView(eventID).hasNums(map[string]int{"remainingSlots": slots})
			})
			// Frozen past the heartbeat timeout, so the resumed dispatcher sees its stall.
			for end := time.Now().Add(processHeartbeatTimeout + 5*pushTick); time.Now().Before(end); time.Sleep(pushTick / 2) {
				if clients[slots].token() != "" {
					t.Fatal("admitted while the only dispatcher was frozen")
				}
			}
			first.thaw()
			thawed := time.Now()
			testkit.Eventually(t, stallTicks*pushTick+slack, "the second wave admitted after the dispatcher resumed", func() error {
				return errors.Join(clients[3].isAdmitted(), clients[4].isAdmitted(), clients[5].isAdmitted())
			})
			took := time.Since(thawed)
			t.Logf("admission resumed %v = %.1f ticks after the dispatcher did", took.Round(time.Millisecond), float64(took)/float64(pushTick))
			testkit.Eventually(t, stallTicks*pushTick+slack, "the stall logged and counted", func() error {
				if stalls := first.metric(t, "rushgate_queue_dispatcher_stalls_total"); stalls < 1 {
					return fmt.Errorf("%v stalls counted", stalls)
				}
				return nil
			})

			// The first acknowledges a tick's routed entries with its next tick: frozen before
			// that, it would leave the second wave pending too, which the other then routes again
			// (the same tokens, harmless) and counts as reclaimed beside the held wave.
			rc := redisClient(t, redisURL(t))
			entries := keyPrefix(t) + "{" + eventID + "}:entry"
			testkit.Eventually(t, stallSetupWait, "the second wave acknowledged", func() error {
				pending, err := rc.XPending(context.Background(), entries, "dispatchers").Result()
				if err != nil {
					return err
				}
				if pending.Count != 0 {
					return fmt.Errorf("%d routed entries not acknowledged", pending.Count)
				}
				return nil
			})

			// A dispatcher stalled holding entries it read: both dispatchers frozen, the test
			// promotes the next wave and reads it as a consumer that never acknowledges, exactly
			// what a dispatcher frozen between reading and routing leaves. The second dispatcher
			// resumes alone and routes them once they are idle for the heartbeat timeout.
			second := startProcess(t, env, "dispatcher-2", "dispatcher")
			first.freeze(t)
			second.freeze(t)
			t.Cleanup(second.thaw)
			for _, c := range clients[slots : 2*slots] {
				c.close()
			}
			testkit.Eventually(t, stallSetupWait, "the slots come back", func() error {
				return broker.queueView(eventID).hasNums(map[string]int{"remainingSlots": slots})
			})
			stalled := redis.NewWaitingRoom(rc, keyPrefix(t))
			ctx := context.Background()
			if n, _, err := stalled.Promote(ctx, eventID, 5*time.Minute, ports.EntryRead{}); err != nil || n != slots {
				t.Fatalf("promote as the stalled dispatcher: %d, %v", n, err)
			}
			if held, err := stalled.ReadEntries(ctx, eventID, ports.EntryRead{Consumer: "stalled-" + broker.run, Count: 10, ReclaimIdle: processHeartbeatTimeout}); err != nil || len(held) != slots {
				t.Fatalf("read as the stalled dispatcher: %v, %v", held, err)
			}
			second.thaw()
			thawed = time.Now()
			testkit.Eventually(t, processHeartbeatTimeout+stallTicks*pushTick+slack, "the held wave admitted by the other dispatcher", func() error {
				return errors.Join(clients[6].isAdmitted(), clients[7].isAdmitted(), clients[8].isAdmitted())
			})
			took = time.Since(thawed)
			t.Logf("entries held by a stalled dispatcher routed %v after the other resumed (heartbeat timeout %v + %.1f ticks)",
				took.Round(time.Millisecond), processHeartbeatTimeout, float64(took-processHeartbeatTimeout)/float64(pushTick))
			if got := second.metric(t, "rushgate_queue_entries_reclaimed_total"); got != slots {
				t.Fatalf("entries reclaimed counted %v, want %d", got, slots)
			}
			if v := broker.queueView(eventID); v.num("admitted") != slots || v.num("claims") != 3*slots {
				t.Fatalf("after the takeover: %s", v.raw)
			}
			first.thaw()

			// Admitted users leave at once, so promotions go on while the first dispatcher
			// stalls again and again.
			done := make(chan struct{})
			go func() {
				defer close(done)
				for left := 0; left < users; time.Sleep(20 * time.Millisecond) {
					left = 0
					for _, c := range clients {
						if c.token() != "" {
							c.close()
							left++
						}
					}
				}
			}()
			// Each freeze lasts past the heartbeat timeout, so entries the first held are taken
			// over, and until the second has admitted someone since the freeze: entries the first
			// read just before it are routable once idle for the heartbeat timeout, then an
			// admission takes the ticks' allowance plus the measured slack.
			held, takeover := processHeartbeatTimeout+5*pushTick, processHeartbeatTimeout+stallTicks*pushTick+slack
			stalls := 0
			for everyoneLeft := false; !everyoneLeft; {
				first.freeze(t)
				frozen := time.Now()
				stalls++
				claims := broker.queueView(eventID).num("claims")
				for ; ; time.Sleep(pushTick) {
					v := broker.queueView(eventID)
					if v.num("admitted") > slots {
						t.Fatalf("more admitted than slots: %s", v.raw)
					}
					progressed := v.num("waiting") == 0 || v.num("claims") > claims
					if since := time.Since(frozen); progressed && since >= held {
						break
					} else if since > takeover {
						t.Fatalf("nobody admitted in the %v the other dispatcher ran alone: %s", since.Round(time.Millisecond), v.raw)
					}
				}
				first.thaw()
				select {
				case <-done:
					everyoneLeft = true
				case <-time.After(3 * pushTick):
				}
			}
			t.Logf("the first dispatcher was frozen %d more times; entries reclaimed from a stalled dispatcher: %v by the first, %v by the second",
				stalls, first.metric(t, "rushgate_queue_entries_reclaimed_total"), second.metric(t, "rushgate_queue_entries_reclaimed_total"))
			for i, c := range clients {
				if c.distinctTokens() != 1 {
					t.Errorf("user %d got %d different tokens", i, c.distinctTokens())
				}
			}
			testkit.Eventually(t, stallSetupWait, "every slot back", func() error {
				return broker.queueView(eventID).hasNums(map[string]int{"admitted": 0, "waiting": 0, "remainingSlots": slots, "connections": 0})
			})
			if v := broker.queueView(eventID); v.num("claims") != users {
				t.Fatalf("promotions %d for %d users: %s", v.num("claims"), users, v.raw)
			}
		})
	}
}
