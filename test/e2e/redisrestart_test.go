package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// TestRedisRestartedEmpty_ServesAgainAndTheDatabaseAnswers restarts a private Redis, which keeps
// nothing on disk, so it comes back empty: every lock, idempotency record and waiting room is
// gone. The server serves again without a restart of its own, and what the database holds
// answers for what Redis lost: a charge, a payment, a coupon issue and an order placed before
// the restart, sent again with their keys, replay their first answers (the balance moves once;
// the order is not placed a second time from the cart filled since); a sold-out event stays sold out; a room is
// opened again from the database with its free seats and slots.
func TestRedisRestartedEmpty_ServesAgainAndTheDatabaseAnswers(t *testing.T) {
	for _, db := range testenv.Databases(t) {
		t.Run(string(db.Dialect), func(t *testing.T) {
			redis := testenv.StartPrivateRedis(t)
			s := startServer(t, backend{name: string(db.Dialect), databaseURL: db.URL, redisURL: redis.URL}, productionTimeouts)
			crewID := s.createCrew(100)
			if res := s.join(crewID, "before", "k"); res.status != http.StatusCreated {
				t.Fatalf("join: %d %s", res.status, res.raw)
			}
			s.createUser("payer", 1000)
			product := s.createProduct("kept", 10, 10)
			paidOrder := s.placeOrder("payer", product, 1, "")
			couponID := s.createCoupon(10)
			issueWithKey := func() response { return s.issue(couponID, "payer", "Idempotency-Key", s.run+"issue") }
			charged, paid, issued := s.charge("payer", "100", "charge"), s.pay("payer", paidOrder, "pay"), issueWithKey()
			if charged.status != http.StatusOK || paid.status != http.StatusOK || issued.status != http.StatusCreated {
				t.Fatalf("charge: %d %s; pay: %d %s; issue: %d %s", charged.status, charged.raw, paid.status, paid.raw,
					issued.status, issued.raw)
			}
			if res := s.addToCart("payer", product, 1); res.status != http.StatusCreated {
				t.Fatalf("add to cart: %d %s", res.status, res.raw)
			}
			placeWithKey := func() response {
				return s.do("POST", "/api/orders", s.token("payer"), "", "Idempotency-Key", s.run+"order")
			}
			placed := placeWithKey()
			if placed.status != http.StatusCreated {
				t.Fatalf("place order: %d %s", placed.status, placed.raw)
			}
			soldOut := s.createEvent(`{"name":"sold out","seats":1,"mode":"pull"}`)
			if res := s.reserve(soldOut, "1", "buyer", s.admit(soldOut, "buyer")); res.status != http.StatusCreated {
				t.Fatalf("reserve: %d %s", res.status, res.raw)
			}
			open := s.createEvent(`{"name":"open","seats":3,"slots":1,"mode":"pull"}`)
			s.admit(open, "admitted-before")

			// Down long enough for joins to open the client's dial circuit (a failed dial per
			// pooled connection), which then probes Redis once a second.
			redis.Stop()
			stopped := time.Now()
			var firstRefusal time.Duration
			for i := 0; time.Since(stopped) < 2*time.Second; i++ {
				sent := time.Now()
				res := s.join(crewID, fmt.Sprint("down-", i), fmt.Sprint("down-", i))
				if res.status != http.StatusServiceUnavailable || res.str("error") != "UNAVAILABLE" || res.header.Get("Retry-After") == "" {
					t.Fatalf("join with Redis down: %d %s, want 503 UNAVAILABLE with Retry-After", res.status, res.raw)
				}
				if took := time.Since(sent); took > stallBound(bootstrap.DefaultConfig().Redis.Timeout, 0) {
					t.Fatalf("a 503 with Redis down took %v", took)
				}
				if i == 0 {
					firstRefusal = time.Since(stopped)
				}
			}
			redis.Restart()
			restarted := time.Now()
			refused := 0
			testkit.Eventually(t, 10*time.Second, "a join after the restart", func() error {
				res := s.join(crewID, fmt.Sprint("after-", refused), fmt.Sprint("after-", refused))
				if res.status == http.StatusCreated {
					return nil
				}
				refused++
				if res.status != http.StatusServiceUnavailable || res.header.Get("Retry-After") == "" {
					t.Errorf("join after the restart: %d %s, want 201 or 503 with Retry-After", res.status, res.raw)
				}
				return fmt.Errorf("join: %d %s", res.status, res.raw)
			})
			t.Logf("first 503 %v after Redis stopped; first join 201 %v after it answered again, %d refused before it",
				firstRefusal.Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond), refused)

			for name, replay := range map[string]struct{ first, again response }{
				"charge":  {charged, s.charge("payer", "100", "charge")},
				"payment": {paid, s.pay("payer", paidOrder, "pay")},
				"coupon":  {issued, issueWithKey()},
			} {
				if replay.again.status != replay.first.status || string(replay.again.raw) != string(replay.first.raw) ||
					replay.again.header.Get("Idempotent-Replayed") != "true" {
					t.Errorf("%s again: %d %s (replayed %q), want the first answer %s", name, replay.again.status, replay.again.raw,
						replay.again.header.Get("Idempotent-Replayed"), replay.first.raw)
				}
			}
			s.assertWallet("payer", 1000+100-10, 3)
			s.assertIssued(couponID, 1)

			if res := s.addToCart("payer", product, 2); res.status != http.StatusCreated {
				t.Fatalf("add to cart after the restart: %d %s", res.status, res.raw)
			}
			again := placeWithKey()
			if again.status != http.StatusCreated || string(again.raw) != string(placed.raw) || again.header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("order again: %d %s (replayed %q), want the first answer %s", again.status, again.raw,
					again.header.Get("Idempotent-Replayed"), placed.raw)
			}
			if c := s.cart("payer"); len(c.Items) != 1 || c.Items[0].Quantity != 2 {
				t.Errorf("the cart filled after the restart: %+v, want its one line of 2 left as it is", c)
			}

			assertError(t, s.enter(soldOut, "late"), http.StatusConflict, "SOLD_OUT")
			if view := s.queueView(soldOut); view.body["soldOut"] != true || view.num("remainingSeats") != 0 {
				t.Errorf("the sold-out event after the restart: %s", view.raw)
			}
			s.admit(open, "admitted-after")
			assertPlace(t, s.enter(open, "waiting-after"), http.StatusCreated, "waiting", 0, 1)
			if err := s.queueView(open).hasNums(map[string]int{"admitted": 1, "remainingSlots": 0, "remainingSeats": 3, "waiting": 1}); err != nil {
				t.Errorf("the room opened again: %v", err)
			}
		})
	}
}

// TestPush_RedisRestartedEmptyEndsEveryStreamAndAdmitsWithinSlots stops a private Redis under
// open push streams, a dispatcher ticking and slots held, then starts it again empty: no stream
// is left open on a queue Redis no longer has (each ends, as a reaped broker's do, while Redis
// is down), and the clients that reconnect form the line again, admitted within the slots,
// FIFO by reconnection.
func TestPush_RedisRestartedEmptyEndsEveryStreamAndAdmitsWithinSlots(t *testing.T) {
	const users, slots = 6, 2
	redis := testenv.StartPrivateRedis(t)
	configure := pushConfig(2 * time.Second)
	s := startServer(t, backend{name: "memory+redis", redisURL: redis.URL}, productionTimeouts, configure)
	// A stream ends once its broker's heartbeat lapses, then within a few ticks on a busy runner.
	var cfg bootstrap.Config
	configure(&cfg)
	endBound := cfg.Queue.BrokerHeartbeatTimeout + 20*pushTick
	eventID := s.createEvent(fmt.Sprintf(`{"name":"push","seats":%d,"slots":%d,"mode":"push"}`, users, slots))
	clients := make([]*sseClient, users)
	for i := range clients {
		clients[i] = s.openStream(eventID, fmt.Sprint("push-", i))
	}
	for _, c := range clients[:slots] {
		testkit.Eventually(t, 5*time.Second, c.user+" admitted", c.isAdmitted)
	}

	redis.Stop()
	stopped := time.Now()
	var slowest time.Duration
	for _, c := range clients {
		select {
		case <-c.ended:
			slowest = max(slowest, time.Since(stopped))
		case <-time.After(endBound - time.Since(stopped)):
			t.Fatalf("%s's stream is still open %v after Redis stopped", c.user, time.Since(stopped))
		}
	}
	t.Logf("every stream ended within %v of Redis stopping", slowest.Round(time.Millisecond))
	redis.Restart()
	back := time.Now()
	refused := 0
	testkit.Eventually(t, 10*time.Second, "a stream opens once Redis is back", func() error {
		status, c := openStream(t, s.url, eventID, "probe", s.token("probe"))
		if status == http.StatusOK {
			c.close()
			return nil
		}
		refused++
		return fmt.Errorf("status %d", status)
	})
	t.Logf("the first stream opened %v after Redis was back, %d refused before it", time.Since(back).Round(time.Millisecond), refused)

	again := make([]*sseClient, users)
	for i := range again {
		again[i] = s.openStream(eventID, fmt.Sprint("push-", i))
		if i >= slots {
			// Reconnected after the first slots were admitted again, so the line is theirs.
			testkit.Eventually(t, 5*time.Second, "the first reconnected users admitted", again[slots-1].isAdmitted)
		}
	}
	for i, c := range again {
		if i < slots {
			testkit.Eventually(t, 5*time.Second, c.user+" admitted again", c.isAdmitted)
			continue
		}
		want := i - slots
		testkit.Eventually(t, 5*time.Second, fmt.Sprintf("%s at rank %d", c.user, want), func() error { return c.isAtRank(want) })
		if c.token() != "" {
			t.Fatalf("%s admitted beyond the %d slots", c.user, slots)
		}
	}
	if err := s.queueView(eventID).hasNums(map[string]int{"admitted": slots, "remainingSlots": 0, "waiting": users - slots, "connections": users}); err != nil {
		t.Fatalf("after the reconnections: %v", err)
	}
}
