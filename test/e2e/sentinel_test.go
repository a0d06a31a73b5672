package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// TestRedisSentinelFailover_EveryFlowAnswersThenServesAgain runs a server on Postgres and on
// MariaDB whose RUSHGATE_REDIS_URL names three sentinels of a private master and its replica.
// It serves through them (a join, a pull waiting room's enter, claim and reservation, a push
// stream admitted); then the master is killed (SIGKILL) under herds of crew joins, balance
// charges, coupon issues and waiting-room entries, and herds go on until the sentinels have
// promoted the replica. Every answer is a success or 503 UNAVAILABLE with Retry-After, within
// the stalled-Redis bound of the later of its sending and the kill; once the replica is
// promoted, every flow succeeds again without a restart of the server, the lock release notices
// are subscribed on the new master, and what the database holds is consistent.
func TestRedisSentinelFailover_EveryFlowAnswersThenServesAgain(t *testing.T) {
	testenv.Long(t, "a Redis master killed under herds, then a Sentinel failover")
	for _, db := range testenv.Databases(t) {
		t.Run(string(db.Dialect), func(t *testing.T) {
			sentinels := testenv.StartRedisSentinels(t)
			var cfg bootstrap.Config
			s := startServer(t, backend{name: string(db.Dialect) + "+redis-sentinel", databaseURL: db.URL, redisURL: sentinels.URL},
				productionTimeouts, pushConfig(2*time.Second), func(c *bootstrap.Config) { cfg = *c })

			servesThroughSentinels(t, s, "before")
			s.createUser("replayed", 0)
			charged := s.charge("replayed", "7", "replayed-charge")
			if charged.status != http.StatusOK {
				t.Fatalf("charge: %d %s", charged.status, charged.raw)
			}

			flows, consistent := guardedFlows(s)
			entries, entriesConsistent := queueEntryFlow(s)
			flows = append(flows, entries)
			var herdLatency time.Duration
			testkit.Eventually(t, 30*time.Second, "a healthy herd of every flow answered with successes", func() error {
				healthy := herd(flows, func() {})()
				herdLatency = 0
				for _, f := range flows {
					for _, a := range healthy[f.name] {
						if a.err != nil || a.status >= 300 {
							return fmt.Errorf("%s before the kill: %v", f.name, a)
						}
						herdLatency = max(herdLatency, a.at.Sub(a.sent))
					}
				}
				return nil
			})
			bound := stallBound(cfg.Redis.Timeout, herdLatency)

			var once sync.Once
			first := make(chan struct{})
			caught := herd(flows, func() { once.Do(func() { close(first) }) })
			<-first
			killed := time.Now()
			old := sentinels.KillMaster(t)
			// Herds go on, one after another, until the sentinels have promoted the replica.
			var promoting atomic.Bool
			promoting.Store(true)
			during := make(chan []map[string][]answer)
			go func() {
				var herds []map[string][]answer
				for promoting.Load() {
					herds = append(herds, herd(flows, func() {})())
				}
				during <- herds
			}()
			promoted := sentinels.AwaitPromotion(t, old)
			promotedAt := time.Now()
			promoting.Store(false)
			herds := append([]map[string][]answer{caught()}, <-during...)
			t.Logf("the sentinels promoted %s %v after %s was killed", promoted, promotedAt.Sub(killed).Round(time.Millisecond), old)

			refused, answered := 0, 0
			for _, h := range herds {
				for name, got := range h {
					for _, a := range got {
						answered++
						took := a.at.Sub(later(a.sent, killed))
						unavailable := a.err == nil && a.status == http.StatusServiceUnavailable && a.code == "UNAVAILABLE" && a.retryAfter != ""
						if unavailable {
							refused++
						}
						if !unavailable && (a.err != nil || a.status >= 300) {
							t.Errorf("%s during the failover: want a success or 503 UNAVAILABLE with Retry-After, got %v", name, a)
						}
						if took > bound {
							t.Errorf("%s during the failover: answered %v after the later of its sending and the kill, want within %v: %v",
								name, took.Round(time.Millisecond), bound, a)
						}
					}
				}
			}
			t.Logf("%d herds during the failover: %d answers, %d refused 503 (bound %v)", len(herds), answered, refused, bound)

			for _, f := range flows {
				testkit.Eventually(t, sentinelRecoveryLimit, f.name+" succeeds again after the promotion", func() error {
					if a := f.send(); a.err != nil || a.status >= 300 {
						return fmt.Errorf("answered %v", a)
					}
					return nil
				})
			}
			t.Logf("every flow succeeded again within %v of the promotion", time.Since(promotedAt).Round(time.Millisecond))

			again := s.charge("replayed", "7", "replayed-charge")
			if again.status != charged.status || string(again.raw) != string(charged.raw) || again.header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("the charge again after the failover: %d %s (replayed %q), want the first answer %s", again.status, again.raw,
					again.header.Get("Idempotent-Replayed"), charged.raw)
			}
			s.assertWallet("replayed", 7, 2)
			consistent()
			entriesConsistent()
			assertReleaseNoticesSubscribed(t, sentinels, promoted)
			servesThroughSentinels(t, s, "after")
		})
	}
}

// sentinelRecoveryLimit bounds how long after the promotion a flow may keep failing: the pool's
// dial circuit, opened by the dials refused while the master was down, probes once a second.
const sentinelRecoveryLimit = 10 * time.Second

// servesThroughSentinels checks what the server answers through the sentinels: a join, a pull
// room's enter, claim and a seat reserved with the token, and a push stream admitted.
func servesThroughSentinels(t *testing.T, s *server, run string) {
	t.Helper()
	if res := s.join(s.createCrew(2), "sentinel-joiner-"+run, ""); res.status != http.StatusCreated {
		t.Fatalf("join: %d %s", res.status, res.raw)
	}
	pull := s.createEvent(`{"name":"through the sentinels","seats":2,"slots":1,"mode":"pull"}`)
	if res := s.reserve(pull, "1", "sentinel-seated-"+run, s.admit(pull, "sentinel-seated-"+run)); res.status != http.StatusCreated {
		t.Fatalf("reserve: %d %s", res.status, res.raw)
	}
	push := s.createEvent(`{"name":"pushed through the sentinels","seats":2,"slots":1,"mode":"push"}`)
	c := s.openStream(push, "sentinel-streamed-"+run)
	defer c.close()
	testkit.Eventually(t, 10*time.Second, "a push stream admitted", c.isAdmitted)
}

// queueEntryFlow enters a new user in one pull event's room per request, with a slot for each:
// its check is the database's, the seats left untouched (entering reserves nothing).
func queueEntryFlow(s *server) (guardedFlow, func()) {
	const seats = 1000
	eventID := s.createEvent(fmt.Sprintf(`{"name":"entered","seats":%d,"slots":%d,"mode":"pull"}`, seats, seats))
	var sent atomic.Int64
	consistent := func() {
		s.t.Helper()
		if st := s.seatState(eventID, seats); st.reservations != 0 || st.reservedSeats != 0 {
			s.t.Errorf("entries reserved seats: %+v", st)
		}
		if view := s.queueView(eventID); view.num("remainingSeats") != seats {
			s.t.Errorf("the room after the failover: %s", view.raw)
		}
	}
	return guardedFlow{"queue entry", func() answer {
		return s.postFromAnyGoroutine("/events/"+eventID+"/queue", fmt.Sprint(s.run, "entrant-", sent.Add(1)), "", "")
	}}, consistent
}

// assertReleaseNoticesSubscribed checks that the server's lock release notices are subscribed on
// master: a lock waiter hears of a release there, not only on its backoff.
func assertReleaseNoticesSubscribed(t *testing.T, sentinels *testenv.RedisSentinels, master string) {
	t.Helper()
	rdb := sentinels.Client(t, master)
	testkit.Eventually(t, 10*time.Second, "the release notices subscribed on the new master "+master, func() error {
		n, err := rdb.PubSubNumPat(context.Background()).Result()
		if err != nil || n == 0 {
			return fmt.Errorf("%d pattern subscriptions, %v", n, err)
		}
		return nil
	})
}
