package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// failoverRecovery bounds how long after the cluster is ok again (a replica promoted, every
// node agreeing) each flow must have succeeded again: the client learns the new topology on its
// next failed call, so a few of the flows' own round trips, generous for a loaded runner.
const failoverRecovery = 5 * time.Second

// TestRedisClusterFailover_EveryFlowAnswersThenServesAgain kills (SIGKILL) the master of a Redis
// Cluster with a replica per master while workers send crew joins, balance charges, coupon
// issues and waiting-room entries, status reads and claims, all on keys of that master (as is
// the release-notice subscription's pattern), and a push room of that master admits streams.
// The replica is promoted within about twice cluster-node-timeout. Every answer is a success
// or 503 UNAVAILABLE with Retry-After, within the Redis timeout + 0.5 s of its sending (a
// status read or claim may also be 404 NOT_IN_QUEUE: the replica may have missed the entry);
// every flow succeeds again within failoverRecovery of the cluster being ok, without a restart
// of the server; the release-notice subscription is open again on a live node; a push stream
// opened after the promotion is admitted; the eviction-policy read finds the three live
// masters. The killed node then restarts as a replica, with no script loaded, and its master is
// killed in turn under the same load and checks, promoting it: the scripts run there. The
// database's invariants hold after both.
func TestRedisClusterFailover_EveryFlowAnswersThenServesAgain(t *testing.T) {
	for _, db := range testenv.Databases(t) {
		t.Run(string(db.Dialect), func(t *testing.T) { failoverUnderLoad(t, db) })
	}
}

func failoverUnderLoad(t *testing.T, db testenv.Database) {
	cluster := testenv.StartFailoverCluster(t)
	var cfg bootstrap.Config
	s := startServer(t, backend{name: string(db.Dialect) + "+redis-cluster", databaseURL: db.URL, redisURL: cluster.URL},
		productionTimeouts, pushConfig(2*time.Second), func(c *bootstrap.Config) {
			c.Guard.LockTTL, c.Guard.LockRetries = testenv.LockTTL, testenv.LockRetries
			cfg = *c
		})
	// A client of the test's own, built before the kill as the server's was: the eviction-policy
	// watch's read through it must find the promoted master.
	watch, err := redis.NewClient(cluster.URL, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = watch.Close() })

	// Everything the flows touch lives on the master that holds the release notices' pattern.
	target := cluster.MasterOf(t, releasedPattern)
	onTarget := func(key string) bool { return cluster.MasterOf(t, key) == target }
	crewID := findOn(t, onTarget, func(int) (string, string) {
		id := s.createCrew(1000 * herdSize)
		return id, "rushgate:lock:{crew:" + id + "}"
	})
	couponID := findOn(t, onTarget, func(int) (string, string) {
		id := s.createCoupon(1000 * herdSize)
		return id, "rushgate:lock:{coupon:" + id + "}"
	})
	payer := findOn(t, onTarget, func(i int) (string, string) {
		id := fmt.Sprintf("%spayer-%d", s.run, i)
		return id, "rushgate:lock:{balance:" + id + "}"
	})
	s.createUser(payer, 0)
	roomKey := func(eventID string) string { return keyPrefix(t) + "{" + eventID + "}:meta" }
	pullEvent := findOn(t, onTarget, func(int) (string, string) {
		id := s.createEvent(`{"name":"failover pull","seats":2000,"slots":2000,"mode":"pull"}`)
		return id, roomKey(id)
	})
	pushEvent := findOn(t, onTarget, func(int) (string, string) {
		id := s.createEvent(`{"name":"failover push","seats":1000,"slots":1000,"mode":"push"}`)
		return id, roomKey(id)
	})
	flows, consistent := guardedFlowsOn(s, crewID, payer, couponID)
	admitted := make([]string, 10)
	for i := range admitted {
		admitted[i] = fmt.Sprint("admitted-", i)
		s.admit(pullEvent, admitted[i])
	}
	flows = append(flows, queueFlows(s, pullEvent, admitted)...)

	// Healthy first: every flow succeeds.
	for _, f := range flows {
		testkit.Eventually(t, 30*time.Second, f.name+" succeeds before the failover", func() error {
			a := f.send()
			if a.err != nil || a.status >= 300 {
				return fmt.Errorf("answered %v", a)
			}
			return nil
		})
	}
	before := s.openStream(pushEvent, "streamed-before")
	testkit.Eventually(t, 10*time.Second, "a push stream admitted before the failover", before.isAdmitted)
	testkit.Eventually(t, 10*time.Second, "the release notices subscribed", func() error {
		if n := cluster.PatternSubscriptions(t); n != 1 {
			return fmt.Errorf("%d pattern subscriptions", n)
		}
		return nil
	})

	killed := killUnderLoad(t, cluster, flows, cfg.Redis.Timeout)
	testkit.Eventually(t, failoverRecovery, "the release notices subscribed again on a live node", func() error {
		if n := cluster.PatternSubscriptions(t); n != 1 {
			return fmt.Errorf("%d pattern subscriptions", n)
		}
		return nil
	})
	testkit.Eventually(t, failoverRecovery, "a push stream opened after the failover is admitted", func() error {
		status, c := openStream(t, s.url, pushEvent, "streamed-after", s.token("streamed-after"))
		if status != http.StatusOK {
			return fmt.Errorf("open stream: %d", status)
		}
		defer c.close()
		return testkit.Poll(failoverRecovery, c.isAdmitted)
	})
	policies, err := redis.MemoryPolicies(context.Background(), watch)
	if err != nil || len(policies) != 3 || slices.ContainsFunc(policies, func(p redis.MemoryPolicy) bool { return p.Node == killed }) {
		t.Errorf("the masters' eviction policies after the failover: %+v (%v), want the three live masters'", policies, err)
	}

	// The killed node comes back as a replica, with no script loaded: the server loaded them into
	// every node when it started. Killing its master again promotes it, and each script's first
	// call there is answered NOSCRIPT and sent again in full.
	cluster.Restart(t, killed)
	if n := cluster.CachedScripts(t, killed); n != 0 {
		t.Fatalf("the restarted node holds %d scripts, want none", n)
	}
	if again := killUnderLoad(t, cluster, flows, cfg.Redis.Timeout); again == killed {
		t.Fatalf("%s killed twice", killed)
	}
	if master := cluster.MasterOf(t, releasedPattern); master != killed {
		t.Fatalf("the master after the second failover is %s, want the restarted %s", master, killed)
	}
	if n := cluster.CachedScripts(t, killed); n == 0 {
		t.Error("the flows succeeded on the promoted node without running a script there")
	}
	testkit.Eventually(t, failoverRecovery, "the release notices subscribed again after the second failover", func() error {
		if n := cluster.PatternSubscriptions(t); n != 1 {
			return fmt.Errorf("%d pattern subscriptions", n)
		}
		return nil
	})
	consistent()
}

// releasedPattern is the release notices' pattern: its slot's master holds their subscription.
const releasedPattern = "rushgate:lock-released:*"

// killUnderLoad kills the master of releasedPattern's slot while workers send every flow, and
// checks every answer: a success or 503 UNAVAILABLE with Retry-After (a status read or claim
// may also be 404 NOT_IN_QUEUE), each within the stall bound of redisTimeout of its sending
// (its slack the slowest answer of the same load before the kill: the server's own time under
// it); and that each flow succeeds again within failoverRecovery of the cluster being ok. It
// returns the killed node's address.
func killUnderLoad(t *testing.T, cluster *testenv.FailoverCluster, flows []guardedFlow, redisTimeout time.Duration) string {
	t.Helper()
	load := startLoad(flows, 3)
	time.Sleep(300 * time.Millisecond) // the workers are mid-flight when the master dies
	killed, at, ok := cluster.KillMasterOf(t, releasedPattern)
	t.Logf("killed the master %s; the cluster was ok again %v later (cluster-node-timeout %v)",
		killed, ok.Sub(at).Round(time.Millisecond), cluster.NodeTimeout)

	// Each flow must succeed again soon after the cluster is ok; the workers keep sending.
	recovered := load.awaitRecovery(t, ok, failoverRecovery)
	answers := load.stop()
	var healthy time.Duration
	for _, got := range answers {
		for _, a := range got {
			if a.at.Before(at) {
				healthy = max(healthy, a.at.Sub(a.sent))
			}
		}
	}
	bound := stallBound(redisTimeout, healthy)
	refused, lost := 0, 0
	for name, got := range answers {
		var first, last time.Time
		n := 0
		for _, a := range got {
			took := a.at.Sub(a.sent)
			switch {
			case a.err == nil && a.status < 300:
			case a.err == nil && a.status == http.StatusServiceUnavailable && a.code == "UNAVAILABLE" && a.retryAfter != "":
				refused++
				n++
				if first.IsZero() {
					first = a.at
				}
				last = a.at
			case a.err == nil && a.status == http.StatusNotFound && a.code == "NOT_IN_QUEUE" && name != "queue entry":
				lost++
			default:
				t.Errorf("%s during the failover: want a success or 503 UNAVAILABLE with Retry-After, got %v", name, a)
			}
			if took > bound {
				t.Errorf("%s during the failover answered %v after it was sent, want within %v", name, took, bound)
			}
		}
		if n > 0 {
			t.Logf("%s: %d answers 503 from %v to %v after the kill", name, n, first.Sub(at).Round(time.Millisecond), last.Sub(at).Round(time.Millisecond))
		}
	}
	t.Logf("answers within %v (the slowest before the kill %v)", bound, healthy.Round(time.Millisecond))
	t.Logf("%d answers during the load, %d of them 503, %d NOT_IN_QUEUE; each flow succeeded again after the cluster was ok: %v",
		countAnswers(answers), refused, lost, recovered)

	return killed
}

// findOn makes things with create(i), i = 0, 1, …, until one's Redis key is on wanted's master,
// and returns its id.
func findOn(t *testing.T, wanted func(key string) bool, create func(i int) (id, key string)) string {
	t.Helper()
	for i := range 60 {
		if id, key := create(i); wanted(key) {
			return id
		}
	}
	t.Fatal("60 tries found no key on the wanted master")
	return ""
}

// queueFlows are a pull room's calls: a new user's entry, and the status read and token claim
// of users admitted before (a claim answers the token the user holds).
func queueFlows(s *server, eventID string, admitted []string) []guardedFlow {
	var n atomic.Int64
	pick := func() string { return admitted[int(n.Add(1))%len(admitted)] }
	return []guardedFlow{
		{"queue entry", func() answer {
			return s.postFromAnyGoroutine("/events/"+eventID+"/queue", fmt.Sprint("queued-", n.Add(1)), "", "")
		}},
		{"queue status", func() answer { return s.getFromAnyGoroutine("/events/"+eventID+"/queue/status", pick()) }},
		{"queue claim", func() answer { return s.postFromAnyGoroutine("/events/"+eventID+"/queue/token", pick(), "", "") }},
	}
}

// load is workers sending each flow's requests back to back until stopped.
type load struct {
	stopping chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	answers  map[string][]answer
}

// startLoad starts workers per flow.
func startLoad(flows []guardedFlow, workers int) *load {
	l := &load{stopping: make(chan struct{}), answers: map[string][]answer{}}
	for _, f := range flows {
		for range workers {
			l.wg.Go(func() {
				for {
					select {
					case <-l.stopping:
						return
					default:
					}
					a := f.send()
					l.mu.Lock()
					l.answers[f.name] = append(l.answers[f.name], a)
					l.mu.Unlock()
				}
			})
		}
	}
	return l
}

// recoveryWait is how long after the cluster is ok awaitRecovery waits for the flows, well past
// its bound, so that a failure says how long recovery did take (the client's own topology
// reload comes after a minute).
const recoveryWait = 75 * time.Second

// awaitRecovery waits until every flow has had a success sent after since, failing t if one
// took longer than limit; it answers how long after since each flow's first such success came.
func (l *load) awaitRecovery(t *testing.T, since time.Time, limit time.Duration) map[string]time.Duration {
	t.Helper()
	recovered := map[string]time.Duration{}
	testkit.Eventually(t, time.Until(since.Add(recoveryWait)), "every flow succeeds again", func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		var waiting []string
		for name, got := range l.answers {
			if _, done := recovered[name]; done {
				continue
			}
			for _, a := range got {
				if a.err == nil && a.status < 300 && a.sent.After(since) {
					recovered[name] = a.at.Sub(since).Round(time.Millisecond)
					break
				}
			}
			if _, done := recovered[name]; !done {
				waiting = append(waiting, name)
			}
		}
		if len(waiting) > 0 {
			return fmt.Errorf("no success yet of %v", waiting)
		}
		return nil
	})
	for name, took := range recovered {
		if took > limit {
			t.Errorf("%s succeeded again only %v after the cluster was ok, want within %v", name, took, limit)
		}
	}
	return recovered
}

// stop ends the workers and answers what each flow got.
func (l *load) stop() map[string][]answer {
	close(l.stopping)
	l.wg.Wait()
	return l.answers
}

func countAnswers(answers map[string][]answer) int {
	n := 0
	for _, got := range answers {
		n += len(got)
	}
	return n
}
