package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
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
			failoverUnderHerds(t, db, func(sentinels *testenv.RedisSentinels) string { return sentinels.KillMaster(t) })
		})
	}
}

// TestRedisSentinelSwitchover_EveryFlowAnswersThenServesAgain is the same through a failover an
// operator asks for (SENTINEL FAILOVER): the old master goes on running, and is made a replica
// of the promoted one, so a connection still open to it would be refused writes (READONLY).
// Once it is a replica, the flows still succeed, on the new master.
func TestRedisSentinelSwitchover_EveryFlowAnswersThenServesAgain(t *testing.T) {
	testenv.Long(t, "a Sentinel failover under herds, the old master running on")
	for _, db := range testenv.Databases(t) {
		t.Run(string(db.Dialect), func(t *testing.T) {
			failoverUnderHerds(t, db, func(sentinels *testenv.RedisSentinels) string { return sentinels.Switchover(t) })
		})
	}
}

// failoverUnderHerds runs a server of db on a private master, replica and sentinels, checks it
// serves through them, then starts a failover with fail under herds (herdThroughAFailover):
// once the replica is promoted every flow succeeds again without a restart of the server, a
// charge made before is replayed from the database, the release notices are subscribed on the
// new master, and what the database holds is consistent, scarce seats and coupons included
// (scarceHerds). Once the old master is the new one's replica (restarted empty, when it was
// killed), the flows still succeed.
func failoverUnderHerds(t *testing.T, db testenv.Database, fail func(*testenv.RedisSentinels) string) {
	t.Helper()
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
	startScarce, scarceConsistent := scarceHerds(s)
	herdLatency := healthyHerdLatency(t, flows, "the kill")
	old, promoted, promotedAt := herdThroughAFailover(t, flows, stallBound(cfg.Redis.Timeout, herdLatency), func() string {
		startScarce()
		return fail(sentinels)
	}, sentinels)
	scarceConsistent()

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
	if sentinels.Running(old) {
		sentinels.AwaitReplica(t, old)
	} else {
		sentinels.RestartNode(t, old)
	}
	for _, f := range flows {
		if a := f.send(); a.err != nil || a.status >= 300 {
			t.Errorf("%s once the old master is a replica: %v", f.name, a)
		}
	}
	servesThroughSentinels(t, s, "demoted")
}

// scarceHerds returns start, which sends a herd of joins of new users to a crew of a third of
// herdSize seats and a herd of coupon issues of a third of herdSize units to half herdSize
// users, each user twice, and check, which waits for their answers: each a success, the crew
// full, the coupon sold out or already issued to the user, or 503 UNAVAILABLE with Retry-After;
// and the database holds no more members than seats, no more coupons issued than units, and
// one coupon per user, whatever Redis lost.
func scarceHerds(s *server) (start, check func()) {
	const scarce = herdSize / 3
	crewID := s.createCrew(scarce)
	couponID := s.createCoupon(scarce)
	var wg sync.WaitGroup
	var answers [2 * herdSize]answer
	start = func() {
		for i := range herdSize {
			wg.Go(func() {
				answers[i] = s.joinFromAnyGoroutine(crewID, fmt.Sprint("scarce-joiner-", i), fmt.Sprint("scarce-join-", i))
			})
			wg.Go(func() {
				answers[herdSize+i] = s.postFromAnyGoroutine("/api/coupons/"+couponID+"/issue", fmt.Sprint("scarce-holder-", i%(herdSize/2)), "", "")
			})
		}
	}
	check = func() {
		s.t.Helper()
		wg.Wait()
		for _, a := range answers {
			refused := a.err == nil && a.status < 500 && (a.code == "CREW_FULL" || a.code == "COUPON_SOLD_OUT" || a.code == "ALREADY_ISSUED")
			unavailable := a.err == nil && a.status == http.StatusServiceUnavailable && a.code == "UNAVAILABLE" && a.retryAfter != ""
			if !refused && !unavailable && (a.err != nil || a.status >= 300) {
				s.t.Errorf("a scarce crew's join or coupon's issue during the failover: %v", a)
			}
		}
		if st := s.stored(crewID); st.currentMembers != st.members || st.members != st.distinctUsers || st.members > scarce {
			s.t.Errorf("the scarce crew: %+v, want as many members as counted, at most %d", st, scarce)
		}
		var rows, users int
		q := s.query("SELECT COUNT(*), COUNT(DISTINCT user_id) FROM user_coupons WHERE coupon_id = ?")
		if err := s.db.QueryRow(q, couponID).Scan(&rows, &users); err != nil {
			s.t.Fatal(err)
		}
		c, err := s.stores.Coupons.Get(context.Background(), couponID)
		if err != nil {
			s.t.Fatal(err)
		}
		if rows != c.IssuedQuantity() || rows != users || rows > scarce {
			s.t.Errorf("the scarce coupon: %d issued, %d user coupons of %d users, want the same, at most %d", c.IssuedQuantity(), rows, users, scarce)
		}
	}
	return start, check
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
			return fmt.Errorf("%d pattern subscriptions, %w", n, err)
		}
		return nil
	})
}

// TestRedisSentinelFailover_TheDatabaseAnswersForTheLostWrites kills the master right after
// writes its replica never received (its link dropped first), so the promoted replica lacks
// them, as an asynchronous replica may: a charge's, a join's and a coupon issue's idempotency
// records, the first entry and token of a pull room, a push stream's connection, and the Lua
// scripts (Redis 7 replicates none). Once promoted, the same charge, join and issue sent again
// with their keys are answered with their first answers from the markers committed with them
// (the balance moved once, one member, one coupon); the lost token's reservation is refused
// and its user enters the room again, opened again from the database with its seats; the push
// stream's client reconnects and is admitted; no script call fails for the scripts missing.
func TestRedisSentinelFailover_TheDatabaseAnswersForTheLostWrites(t *testing.T) {
	testenv.Long(t, "a Redis master killed after writes its replica lost, then a Sentinel failover")
	for _, db := range testenv.Databases(t) {
		t.Run(string(db.Dialect), func(t *testing.T) {
			sentinels := testenv.StartRedisSentinels(t)
			s := startServer(t, backend{name: string(db.Dialect) + "+redis-sentinel", databaseURL: db.URL, redisURL: sentinels.URL},
				productionTimeouts, pushConfig(2*time.Second))
			s.createUser("lost", 0)
			crewID := s.createCrew(3)
			couponID := s.createCoupon(3)
			pull := s.createEvent(`{"name":"lost room","seats":3,"slots":1,"mode":"pull"}`)
			push := s.createEvent(`{"name":"lost stream","seats":3,"slots":1,"mode":"push"}`)
			servesThroughSentinels(t, s, "before")

			var charged, joined, issued response
			var token string
			var stream *sseClient
			var streamStatus int
			old := sentinels.KillMasterLosingWrites(t, func() {
				charged = s.charge("lost", "5", "lost-charge")
				joined = s.join(crewID, "lost-joiner", "lost-join")
				issued = s.issue(couponID, "lost-holder", "Idempotency-Key", s.run+"lost-issue")
				token = s.admit(pull, "lost-admitted")
				streamStatus, stream = openStream(t, s.url, push, "lost-streamed", s.token("lost-streamed"))
			})
			if charged.status != http.StatusOK || joined.status != http.StatusCreated || issued.status != http.StatusCreated ||
				streamStatus != http.StatusOK {
				t.Fatalf("before the kill: charge %d %s; join %d %s; issue %d %s; stream %d", charged.status, charged.raw,
					joined.status, joined.raw, issued.status, issued.raw, streamStatus)
			}
			defer stream.close()
			promoted := sentinels.AwaitPromotion(t, old)
			rdb := sentinels.Client(t, promoted)
			ctx := context.Background()
			lost, err := rdb.Keys(ctx, "rushgate:idem:*lost-*").Result()
			if err != nil || len(lost) != 0 {
				t.Fatalf("the promoted replica holds the lost records %v (%v): the writes were not lost", lost, err)
			}
			if info, err := rdb.Info(ctx, "memory").Result(); err != nil || !strings.Contains(info, "number_of_cached_scripts:0\r\n") {
				t.Fatalf("the promoted replica has scripts loaded (%v): %s", err, info)
			}

			testkit.Eventually(t, sentinelRecoveryLimit, "the charge sent again after the promotion", func() error {
				if again := s.charge("lost", "5", "lost-charge"); again.status != http.StatusOK {
					return fmt.Errorf("%d %s", again.status, again.raw)
				}
				return nil
			})
			for name, replay := range map[string]struct{ first, again response }{
				"charge": {charged, s.charge("lost", "5", "lost-charge")},
				"join":   {joined, s.join(crewID, "lost-joiner", "lost-join")},
				"issue":  {issued, s.issue(couponID, "lost-holder", "Idempotency-Key", s.run+"lost-issue")},
			} {
				if replay.again.status != replay.first.status || string(replay.again.raw) != string(replay.first.raw) ||
					replay.again.header.Get("Idempotent-Replayed") != "true" {
					t.Errorf("%s again: %d %s (replayed %q), want the first answer %s", name, replay.again.status, replay.again.raw,
						replay.again.header.Get("Idempotent-Replayed"), replay.first.raw)
				}
			}
			s.assertWallet("lost", 5, 2)
			s.assertIssued(couponID, 1)
			if st := s.stored(crewID); st.members != 1 || st.currentMembers != 1 {
				t.Errorf("the crew after the join sent again: %+v, want one member", st)
			}

			assertError(t, s.reserve(pull, "1", "lost-admitted", token), http.StatusForbidden, "ENTRY_TOKEN_REQUIRED")
			again := s.admit(pull, "lost-admitted")
			if res := s.reserve(pull, "1", "lost-admitted", again); res.status != http.StatusCreated {
				t.Errorf("reserve with the token claimed again: %d %s", res.status, res.raw)
			}
			if err := s.queueView(pull).hasNums(map[string]int{"remainingSeats": 2}); err != nil {
				t.Errorf("the room opened again: %v", err)
			}

			select {
			case <-stream.ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the stream whose connection the promoted replica lost is still open 10 s after the promotion")
			}
			reconnected := s.openStream(push, "lost-streamed")
			defer reconnected.close()
			testkit.Eventually(t, 10*time.Second, "the reconnected stream admitted", reconnected.isAdmitted)
			servesThroughSentinels(t, s, "after")
		})
	}
}

// herdThroughAFailover sends herds of every flow, the first caught by fail (which starts a
// failover and returns the master's address), the next ones one after another until the
// sentinels have promoted the replica. Every answer must be a success or 503 UNAVAILABLE with
// Retry-After, within bound of the later of its sending and the failover's start. It returns
// the old master, the promoted one and when the sentinels reported it.
func herdThroughAFailover(t *testing.T, flows []guardedFlow, bound time.Duration, fail func() string,
	sentinels *testenv.RedisSentinels) (old, promoted string, promotedAt time.Time) {
	t.Helper()
	var once sync.Once
	first := make(chan struct{})
	caught := herd(flows, func() { once.Do(func() { close(first) }) })
	<-first
	failed := time.Now()
	old = fail()
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
	promoted = sentinels.AwaitPromotion(t, old)
	promotedAt = time.Now()
	promoting.Store(false)
	herds := append([]map[string][]answer{caught()}, <-during...)
	t.Logf("the sentinels promoted %s %v after the failover of %s began", promoted, promotedAt.Sub(failed).Round(time.Millisecond), old)

	refused, answered := 0, 0
	for _, h := range herds {
		for name, got := range h {
			for _, a := range got {
				answered++
				took := a.at.Sub(later(a.sent, failed))
				unavailable := a.err == nil && a.status == http.StatusServiceUnavailable && a.code == "UNAVAILABLE" && a.retryAfter != ""
				if unavailable {
					refused++
				}
				if !unavailable && (a.err != nil || a.status >= 300) {
					t.Errorf("%s during the failover: want a success or 503 UNAVAILABLE with Retry-After, got %v", name, a)
				}
				if took > bound {
					t.Errorf("%s during the failover: answered %v after the later of its sending and the failover's start, want within %v: %v",
						name, took.Round(time.Millisecond), bound, a)
				}
			}
		}
	}
	t.Logf("%d herds during the failover: %d answers, %d refused 503 (bound %v)", len(herds), answered, refused, bound)
	return old, promoted, promotedAt
}

// TestRedisSentinelFailover_TheServersSentinelStalled freezes the sentinel the server asks for
// the master's address (SIGSTOP: its connections stay open, nothing answers), as a sentinel
// whose host is cut off, then kills the master: the other two sentinels, a majority, promote
// the replica, and the server must find it through them without a restart, within
// sentinelRecoveryLimit of the promotion.
func TestRedisSentinelFailover_TheServersSentinelStalled(t *testing.T) {
	testenv.Long(t, "a Sentinel failover with the server's sentinel frozen")
	sentinels := testenv.StartRedisSentinels(t)
	s := startServer(t, backend{name: "postgres+redis-sentinel", databaseURL: testenv.Postgres(t).URL, redisURL: sentinels.URL},
		productionTimeouts)
	crewID := s.createCrew(100)
	if res := s.join(crewID, "before", "before"); res.status != http.StatusCreated {
		t.Fatalf("join: %d %s", res.status, res.raw)
	}
	sentinels.FreezeSentinel(t, sentinels.SubscribedSentinel(t))
	promoted := sentinels.AwaitPromotion(t, sentinels.KillMaster(t))
	promotedAt := time.Now()
	refused := 0
	testkit.Eventually(t, sentinelRecoveryLimit, "a join after the promotion to "+promoted, func() error {
		res := s.join(crewID, fmt.Sprint("after-", refused), fmt.Sprint("after-", refused))
		if res.status == http.StatusCreated {
			return nil
		}
		refused++
		if res.status != http.StatusServiceUnavailable || res.header.Get("Retry-After") == "" {
			t.Errorf("join after the promotion: %d %s, want 201 or 503 with Retry-After", res.status, res.raw)
		}
		return fmt.Errorf("join: %d %s", res.status, res.raw)
	})
	t.Logf("the first join succeeded %v after the promotion, %d refused before it", time.Since(promotedAt).Round(time.Millisecond), refused)
}
