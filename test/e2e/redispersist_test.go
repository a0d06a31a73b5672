package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rgredis "github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/application/waiting"
	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// TestRedisRestartedFromItsLog_PullLineTokensAndSeatsCarryOn kills (SIGKILL) a private Redis
// that logs every write before answering it (appendonly yes, appendfsync always) in the middle
// of a pull sale, with a herd of entries in flight, and starts it again from its log: the line
// comes back as it was (every entry answered 201 keeps its place, in the order it was told, and
// nobody is in it twice), an admitted user's token still reserves a seat, admission carries on
// within the slots, no seat is sold twice, and a sold-out event stays sold out through another
// restart.
func TestRedisRestartedFromItsLog_PullLineTokensAndSeatsCarryOn(t *testing.T) {
	for _, db := range testenv.Databases(t) {
		t.Run(string(db.Dialect), func(t *testing.T) {
			redis := testenv.StartPersistentRedis(t)
			s := startServer(t, backend{name: string(db.Dialect), databaseURL: db.URL, redisURL: redis.URL}, productionTimeouts)
			const seats, slots, herd, senders = 5, 2, 80, 8
			eventID := s.createEvent(fmt.Sprintf(`{"name":"persisted","seats":%d,"slots":%d,"mode":"pull"}`, seats, slots))
			tokens := map[string]string{"first": s.admit(eventID, "first"), "second": s.admit(eventID, "second")}
			if res := s.reserve(eventID, "1", "first", tokens["first"]); res.status != http.StatusCreated {
				t.Fatalf("reserve before the restart: %d %s", res.status, res.raw)
			}

			users := make([]string, herd)
			for i := range users {
				users[i] = fmt.Sprint("herd-", i)
			}
			// Each sender enters its users one after the other; Redis dies once half the herd has
			// been answered, with entries in flight, and the rest are sent while it is down.
			answers := make([]response, herd)
			answered := make(chan struct{}, herd)
			killed := make(chan struct{})
			go func() {
				defer close(killed)
				for range herd / 2 {
					<-answered
				}
				redis.Stop()
			}()
			testkit.StartTogether(senders, func(sender int) {
				for i := sender; i < herd; i += senders {
					answers[i] = s.enter(eventID, users[i])
					answered <- struct{}{}
				}
			})
			<-killed
			redis.Restart()

			var told []string // the users answered 201, by the rank they were told
			refused := 0
			for i, res := range answers {
				switch {
				case res.status == http.StatusCreated:
					told = append(told, users[i])
				case res.status == http.StatusServiceUnavailable && res.str("error") == "UNAVAILABLE":
					refused++
				default:
					t.Fatalf("%s's entry: %d %s, want 201 or 503", users[i], res.status, res.raw)
				}
			}
			rankOf := func(user string) int {
				for i, res := range answers {
					if users[i] == user {
						return res.num("rank")
					}
				}
				return -1
			}
			slices.SortFunc(told, func(a, b string) int { return rankOf(a) - rankOf(b) })
			t.Logf("%d entries answered 201 and %d refused 503 around the kill", len(told), refused)

			testkit.Eventually(t, 10*time.Second, "a poll once Redis is back", func() error {
				return s.queueStatus(eventID, told[0]).hasStatus("waiting")
			})
			// Every entry answered 201 holds the place it was told; an entry refused may or may
			// not have been written, and is in line once at most.
			ranks := map[int]string{}
			waiting := 0
			for _, u := range users {
				res := s.queueStatus(eventID, u)
				if res.status == http.StatusNotFound && res.str("error") == "NOT_IN_QUEUE" && !slices.Contains(told, u) {
					continue
				}
				if res.status != http.StatusOK || res.body["rank"] == nil {
					t.Fatalf("%s after the restart: %d %s", u, res.status, res.raw)
				}
				if other, taken := ranks[res.num("rank")]; taken {
					t.Fatalf("%s and %s both at rank %d", u, other, res.num("rank"))
				}
				ranks[res.num("rank")] = u
				waiting++
			}
			var kept []string
			for rank := range waiting {
				if u, ok := ranks[rank]; !ok {
					t.Fatalf("nobody at rank %d of %d: %v", rank, waiting, ranks)
				} else if slices.Contains(told, u) {
					kept = append(kept, u)
				}
			}
			if !slices.Equal(kept, told) {
				t.Fatalf("the line after the restart keeps %v, want every user answered 201 in the order told %v", kept, told)
			}
			t.Logf("the line came back with the %d users answered 201 in order, and %d of the %d refused", len(told), waiting-len(told), refused)
			if err := s.queueView(eventID).hasNums(map[string]int{"waiting": waiting, "admitted": slots, "remainingSlots": 0}); err != nil {
				t.Fatalf("the room after the restart: %v", err)
			}
			assertPlace(t, s.queueStatus(eventID, "first"), http.StatusOK, "entered", 0, 0)
			if res := s.reserve(eventID, "2", "second", tokens["second"]); res.status != http.StatusCreated {
				t.Fatalf("the token claimed before the restart: %d %s", res.status, res.raw)
			}

			// Admission carries on, head of the line first, never beyond the slots, until the
			// seats are gone.
			line := make([]string, waiting)
			for rank, u := range ranks {
				line[rank] = u
			}
			holders := []string{"first", "second"}
			for seat := 3; seat <= seats+1; seat += slots {
				for _, u := range holders {
					if res := s.giveBack(eventID, u); res.status != http.StatusNoContent {
						t.Fatalf("return %s's token: %d %s", u, res.status, res.raw)
					}
				}
				claimed := make([]response, len(line))
				testkit.StartTogether(len(line), func(i int) { claimed[i] = s.claim(eventID, line[i]) })
				holders = nil
				for i, res := range claimed {
					if res.status == http.StatusCreated {
						holders = append(holders, line[i])
						tokens[line[i]] = res.str("token")
					} else if res.status != http.StatusConflict {
						t.Fatalf("%s's claim: %d %s", line[i], res.status, res.raw)
					}
				}
				if !slices.Equal(holders, line[:min(slots, len(line))]) {
					t.Fatalf("claimed %v, want the head of the line %v", holders, line[:slots])
				}
				line = line[len(holders):]
				if v := s.queueView(eventID); v.num("admitted") > slots {
					t.Fatalf("admitted beyond the %d slots: %s", slots, v.raw)
				}
				for i, u := range holders {
					res := s.reserve(eventID, fmt.Sprint(seat+i), u, tokens[u])
					if seat+i <= seats && res.status != http.StatusCreated {
						t.Fatalf("%s reserves seat %d: %d %s", u, seat+i, res.status, res.raw)
					}
					if seat+i > seats && res.status != http.StatusConflict && res.status != http.StatusNotFound {
						t.Fatalf("%s reserves seat %d of %d: %d %s", u, seat+i, seats, res.status, res.raw)
					}
				}
			}
			// The last holders try every seat: none is sold twice.
			for _, u := range holders {
				for seat := 1; seat <= seats; seat++ {
					assertError(t, s.reserve(eventID, fmt.Sprint(seat), u, tokens[u]), http.StatusConflict, "SOLD_OUT")
				}
			}
			if st := s.seatState(eventID, seats); st != (seatState{reservations: seats, reservedSeats: seats, distinctSeats: seats}) {
				t.Fatalf("seats after the sale: %+v, want each of %d reserved once", st, seats)
			}

			redis.Restart()
			testkit.Eventually(t, 10*time.Second, "sold out after another restart", func() error {
				res := s.enter(eventID, "late")
				if res.status != http.StatusConflict || res.str("error") != "SOLD_OUT" {
					return fmt.Errorf("%d %s", res.status, res.raw)
				}
				return nil
			})
		})
	}
}

// TestRedisRestartedFromItsLog_LocksAndRecordsOfAGoneHolderExpire: a seat lock and an
// idempotency record whose holders are gone (taken, then never released or completed, as by a
// server killed mid-request) come back with a Redis restarted from its log, and keep their
// deadlines: the lock expires by its TTL and the seat is reserved, the record's lease ends and
// the retry is answered from the database's marker, never held past them.
func TestRedisRestartedFromItsLog_LocksAndRecordsOfAGoneHolderExpire(t *testing.T) {
	db := testenv.Postgres(t)
	redis := testenv.StartPersistentRedis(t)
	s := startServer(t, backend{name: "postgres", databaseURL: db.URL, redisURL: redis.URL}, productionTimeouts)
	client := redisClient(t, redis.URL)
	ctx := context.Background()

	eventID := s.createEvent(`{"name":"locked","seats":3,"slots":1,"mode":"pull"}`)
	token := s.admit(eventID, "buyer")
	crewID := s.createCrew(5)
	joined := s.join(crewID, "joiner", "k1")
	if joined.status != http.StatusCreated {
		t.Fatalf("join: %d %s", joined.status, joined.raw)
	}
	// Taken last before the restart, so that the lock's TTL is what the restart has.
	gone := rgredis.NewLocker(client)
	t.Cleanup(func() { _ = gone.Close() })
	lockTTL := waiting.SeatLockTTL
	if _, err := gone.TryAcquire(ctx, "seat:"+eventID+":2", lockTTL); err != nil {
		t.Fatal(err)
	}
	lockKey := "rushgate:lock:{seat:" + eventID + ":2}"
	// What a server killed after the join's commit and before its answer reached the record
	// leaves: the record in progress under a lease that has not run out.
	const lease = 3 * time.Second
	record := idempotencyRecord("joiner", s.run+"k1")
	clock, err := client.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := client.HSet(ctx, record, "status", "IN_PROGRESS", "token", "gone", "lease_until",
		fmt.Sprint(clock.Add(lease).UnixMilli())).Err(); err != nil {
		t.Fatal(err)
	}
	taken := time.Now()

	redis.Restart()
	for key, bound := range map[string]time.Duration{lockKey: lockTTL, record: bootstrap.DefaultConfig().Guard.IdempotencyTTL} {
		left, err := client.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		// Both come back (a restart takes far less than the lock's TTL), each with no more
		// than its own time to live; -1 would be a key kept for ever.
		if left <= 0 || left > bound {
			t.Fatalf("%s came back with %v to live (-1: for ever, -2: not at all), want some of its %v", key, left, bound)
		}
	}

	refused := untilCreated(t, lease+testkitSlack, "the retry answered once the gone holder's lease ended",
		"IDEMPOTENCY_IN_PROGRESS", func() response { return s.join(crewID, "joiner", "k1") }, func(res response) {
			if res.header.Get("Idempotent-Replayed") != "true" || string(res.raw) != string(joined.raw) {
				t.Fatalf("the retry: %d %s (replayed %q), want the first answer %s", res.status, res.raw,
					res.header.Get("Idempotent-Replayed"), joined.raw)
			}
		})
	if st := s.stored(crewID); st.currentMembers != 1 || st.members != 1 {
		t.Fatalf("stored %+v, want the one join", st)
	}
	t.Logf("the retry was answered %v after the record was left in progress (lease %v), %d refused before", time.Since(taken).Round(time.Millisecond), lease, refused)

	waited := untilCreated(t, lockTTL+waiting.SeatLockWait+testkitSlack, "the seat reserved once the gone holder's lock expired",
		"SEAT_BEING_SELECTED", func() response { return s.reserve(eventID, "2", "buyer", token) }, func(response) {})
	t.Logf("the seat was reserved %v after the lock was taken (TTL %v), %d refused before", time.Since(taken).Round(time.Millisecond), lockTTL, waited)
}

// untilCreated sends again until an answer is 201, which check then judges, within bound; every
// answer before it must be 503 or 409 with the code refusal. It returns how many were refused.
func untilCreated(t *testing.T, bound time.Duration, what, refusal string, send func() response, check func(response)) int {
	t.Helper()
	refused := 0
	testkit.Eventually(t, bound, what, func() error {
		res := send()
		if res.status == http.StatusCreated {
			check(res)
			return nil
		}
		if (res.status != http.StatusConflict || res.str("error") != refusal) && res.status != http.StatusServiceUnavailable {
			t.Fatalf("%s: refused with %d %s, want 409 %s or 503", what, res.status, res.raw, refusal)
		}
		refused++
		return fmt.Errorf("%d %s", res.status, res.raw)
	})
	return refused
}

// TestPush_RedisRestartedFromItsLogEndsEveryStreamAndGivesPlacesBack opens push streams, some
// admitted and some waiting, kills (SIGKILL) a Redis that logs every write and starts it again
// from its log: every stream ends while Redis is down (as with a Redis restarted empty), the
// dispatcher ticks again (a probe user of another event is admitted), and the clients that
// reconnect then, in reverse order, get back what Redis kept: the admitted ones their
// admission and token, the others their places in the order they first connected. The brokers'
// heartbeats came back expired, and the reaping of their old ids that follows a heartbeat
// timeout later leaves the reconnected users where they are.
func TestPush_RedisRestartedFromItsLogEndsEveryStreamAndGivesPlacesBack(t *testing.T) {
	const users, slots = 6, 2
	redis := testenv.StartPersistentRedis(t)
	// Long enough for the reconnections to come well within the heartbeat timeout.
	const heartbeatTimeout = 5 * time.Second
	configure := func(cfg *bootstrap.Config) {
		pushConfig(heartbeatTimeout)(cfg)
		cfg.Queue.BrokerHeartbeatTimeout = heartbeatTimeout
	}
	s := startServer(t, backend{name: "memory+redis", redisURL: redis.URL}, productionTimeouts, configure)
	endBound := heartbeatTimeout + 20*pushTick
	eventID := s.createEvent(fmt.Sprintf(`{"name":"push","seats":%d,"slots":%d,"mode":"push"}`, users, slots))
	clients := make([]*sseClient, users)
	for i := range clients {
		clients[i] = s.openStream(eventID, fmt.Sprint("push-", i))
		if i < slots {
			testkit.Eventually(t, 5*time.Second, clients[i].user+" admitted", clients[i].isAdmitted)
		}
	}
	for i, c := range clients[slots:] {
		testkit.Eventually(t, 5*time.Second, fmt.Sprintf("%s at rank %d", c.user, i), func() error { return c.isAtRank(i) })
	}
	probeEvent := s.createEvent(`{"name":"probe","seats":1,"slots":1,"mode":"push"}`)

	redis.Stop()
	stopped := time.Now()
	for _, c := range clients {
		select {
		case <-c.ended:
		case <-time.After(endBound - time.Since(stopped)):
			t.Fatalf("%s's stream is still open %v after Redis stopped", c.user, time.Since(stopped))
		}
	}
	redis.Restart()
	reapedBefore := metricAt(t, s.url, "rushgate_queue_brokers_reaped_total")
	// A promotion comes after the dead brokers' reaping in a dispatcher's tick.
	testkit.Eventually(t, 10*time.Second, "a probe admitted once Redis is back", func() error {
		status, c := openStream(t, s.url, probeEvent, "probe", s.token("probe"))
		if status != http.StatusOK {
			return fmt.Errorf("status %d", status)
		}
		defer c.close()
		testkit.Eventually(t, 5*time.Second, "the probe admitted", c.isAdmitted)
		return nil
	})

	again := make([]*sseClient, users)
	for i := users - 1; i >= 0; i-- {
		again[i] = s.openStream(eventID, clients[i].user)
	}
	for i, c := range again {
		if i < slots {
			testkit.Eventually(t, 5*time.Second, c.user+" admitted again", c.isAdmitted)
			if c.token() != clients[i].token() {
				t.Errorf("%s admitted again with token %q, want the one it held, %q", c.user, c.token(), clients[i].token())
			}
			continue
		}
		testkit.Eventually(t, 5*time.Second, fmt.Sprintf("%s back at rank %d", c.user, i-slots), func() error { return c.isAtRank(i - slots) })
	}
	want := map[string]int{"admitted": slots, "remainingSlots": 0, "waiting": users - slots, "connections": users}
	if err := s.queueView(eventID).hasNums(want); err != nil {
		t.Fatalf("after the reconnections: %v", err)
	}
	testkit.Eventually(t, heartbeatTimeout+testkitSlack, "the brokers' old ids reaped", func() error {
		if reaped := metricAt(t, s.url, "rushgate_queue_brokers_reaped_total"); reaped <= reapedBefore {
			return fmt.Errorf("%v reaped", reaped)
		}
		return nil
	})
	if err := s.queueView(eventID).hasNums(want); err != nil {
		t.Fatalf("after the old ids were reaped: %v", err)
	}
	for i, c := range again[slots:] {
		if err := c.isAtRank(i); err != nil {
			t.Fatalf("after the old ids were reaped: %v", err)
		}
	}
}

// The tests below emulate a Redis that fsyncs its log once a second (appendfsync everysec)
// and dies: it comes back with a prefix of its writes, missing the last ones, while the server,
// which kept running, remembers what it did with them.

// TestRedisLostItsLastWrites_APrequeueOpenedIsOpenedAgainInTicketOrder: the server opens a
// pre-queue, then Redis comes back from a log cut before the opening: the room is gated again
// with its users pre-queued. The server, which remembered the opening as done, opens it again,
// in the same ticket order, and admission starts.
func TestRedisLostItsLastWrites_APrequeueOpenedIsOpenedAgainInTicketOrder(t *testing.T) {
	const slots = 2
	redis := testenv.StartPersistentRedis(t)
	s := startServer(t, backend{name: "postgres", databaseURL: testenv.Postgres(t).URL, redisURL: redis.URL}, pushConfig(0))
	eventID, opensAt := s.prequeueEvent("pull", "shuffle", 10, slots)
	early := make([]string, 6)
	for i := range early {
		early[i] = fmt.Sprint("early-", i)
		if res := s.enter(eventID, early[i]); res.status != http.StatusCreated || res.str("status") != "prequeue" {
			t.Fatalf("entry %d: %d %s", i, res.status, res.raw)
		}
	}
	beforeOpening := redis.LogLength(t)
	if time.Now().After(opensAt) {
		t.Fatalf("the entries took past opensAt (%v): raise prequeueOpensIn", prequeueOpensIn)
	}
	order := drawOrder(s.publishedSeed(eventID, time.Until(opensAt)+2*pushTick+testkitSlack), early)
	ranked := func() error {
		for rank, u := range order {
			res := s.queueStatus(eventID, u)
			if res.status != http.StatusOK || res.body["rank"] == nil || res.num("rank") != rank {
				return fmt.Errorf("%s should be at rank %d: %d %s", u, rank, res.status, res.raw)
			}
		}
		return nil
	}
	if err := ranked(); err != nil {
		t.Fatalf("after the opening: %v", err)
	}

	redis.RestartFromLog(t, beforeOpening)
	if res := s.queueStatus(eventID, order[0]); res.status == http.StatusOK && res.str("status") == "prequeue" {
		t.Logf("Redis came back with the pre-queue not opened: %s", res.raw)
	}
	testkit.Eventually(t, 2*pushTick+testkitSlack, "the pre-queue opened again in ticket order", ranked)
	for rank, u := range order {
		res := s.claim(eventID, u)
		if (res.status == http.StatusCreated) != (rank < slots) {
			t.Fatalf("%s at rank %d claims: %d %s, with %d slots", u, rank, res.status, res.raw, slots)
		}
	}
	if v := s.queueView(eventID); v.num("admitted") != slots || v.num("waiting") != len(order)-slots || v.num("prequeued") != 0 {
		t.Fatalf("the room opened again: %s", v.raw)
	}
}

// TestRedisLostItsLastWrites_ASoldOutEventIsSoldOutAgain: the last seat is reserved and the
// room marked sold out, then Redis comes back from a log cut before both: the room has a seat
// and a line again for a seat the database has sold. The server marks it sold out again.
func TestRedisLostItsLastWrites_ASoldOutEventIsSoldOutAgain(t *testing.T) {
	redis := testenv.StartPersistentRedis(t)
	s := startServer(t, backend{name: "postgres", databaseURL: testenv.Postgres(t).URL, redisURL: redis.URL}, pushConfig(0))
	eventID := s.createEvent(`{"name":"last seat","seats":1,"slots":1,"mode":"pull"}`)
	token := s.admit(eventID, "buyer")
	beforeSale := redis.LogLength(t)
	if res := s.reserve(eventID, "1", "buyer", token); res.status != http.StatusCreated {
		t.Fatalf("reserve: %d %s", res.status, res.raw)
	}
	assertError(t, s.enter(eventID, "after"), http.StatusConflict, "SOLD_OUT")

	redis.RestartFromLog(t, beforeSale)
	testkit.Eventually(t, 2*pushTick+testkitSlack, "sold out again", func() error {
		if res := s.enter(eventID, "late"); res.status != http.StatusConflict || res.str("error") != "SOLD_OUT" {
			return fmt.Errorf("entry: %d %s", res.status, res.raw)
		}
		if v := s.queueView(eventID); v.body["soldOut"] != true || v.num("waiting") != 0 {
			return fmt.Errorf("queue: %s", v.raw)
		}
		return nil
	})
	if st := s.seatState(eventID, 1); st != (seatState{reservations: 1, reservedSeats: 1, distinctSeats: 1}) {
		t.Fatalf("seats: %+v", st)
	}
}

// TestRedisLostItsLastWrites_LoweredSlotsHoldAgain: an operator lowers the slots, then Redis
// comes back from a log cut before the change: the room would admit by the slots it had. The
// server sets the database's slots again, and nobody is admitted beyond them.
func TestRedisLostItsLastWrites_LoweredSlotsHoldAgain(t *testing.T) {
	redis := testenv.StartPersistentRedis(t)
	s := startServer(t, backend{name: "postgres", databaseURL: testenv.Postgres(t).URL, redisURL: redis.URL}, pushConfig(0))
	eventID := s.createEvent(`{"name":"lowered","seats":10,"slots":3,"mode":"pull"}`)
	s.admit(eventID, "admitted")
	line := []string{"next-0", "next-1", "next-2"}
	for _, u := range line {
		if res := s.enter(eventID, u); res.status != http.StatusCreated {
			t.Fatalf("enter %s: %d %s", u, res.status, res.raw)
		}
	}
	beforeChange := redis.LogLength(t)
	if res := s.do("PATCH", "/admin/events/"+eventID, s.adminToken(), `{"slots":1}`); res.status != http.StatusOK {
		t.Fatalf("lower the slots: %d %s", res.status, res.raw)
	}

	redis.RestartFromLog(t, beforeChange)
	testkit.Eventually(t, 2*pushTick+testkitSlack, "the lowered slots set again", func() error {
		return s.queueView(eventID).hasNums(map[string]int{"slots": 1, "remainingSlots": 0, "admitted": 1})
	})
	for _, u := range line {
		assertError(t, s.claim(eventID, u), http.StatusConflict, "NOT_READY")
	}
}

// TestRedisLostItsLastWrites_ARoomRefilledInTheLostSecondIsStillFound: a room the
// reconciliation pass found empty leaves the index of events in use; a user enters it again
// (and never polls), then Redis comes back from a log cut at any point of that entry's writes.
// Whatever the cut kept, the passes still find the room: the user, if the entry was kept, is
// dropped as idle; none is left in a line that no pass walks.
func TestRedisLostItsLastWrites_ARoomRefilledInTheLostSecondIsStillFound(t *testing.T) {
	redis := testenv.StartPersistentRedis(t)
	s := startServer(t, backend{name: "memory+redis", redisURL: redis.URL}, idleDrops)
	eventID := s.createEvent(`{"name":"refilled","seats":5,"slots":1,"mode":"pull"}`)
	testkit.Eventually(t, 10*pushTick+testkitSlack, "the empty room unlisted", func() error {
		return unlistedIn(readLog(t, redis, 0), eventID)
	})
	beforeEntry := redis.LogLength(t)
	if res := s.enter(eventID, "idle"); res.status != http.StatusCreated {
		t.Fatalf("enter: %d %s", res.status, res.raw)
	}
	everyCutLeavesNobodyWaiting(t, s, redis, eventID, beforeEntry)
}

// TestRedisLostItsLastWrites_ARoomCreatedInTheLostSecondIsStillFound: an event is created and
// a user enters its room (and never polls), then Redis comes back from a log cut at any point
// of those writes. Whatever the cut kept (the event listed without a room, the room without
// the user, the user), the passes find the room, opening it again from the database if need
// be, and drop the user as idle.
func TestRedisLostItsLastWrites_ARoomCreatedInTheLostSecondIsStillFound(t *testing.T) {
	redis := testenv.StartPersistentRedis(t)
	s := startServer(t, backend{name: "memory+redis", redisURL: redis.URL}, idleDrops)
	beforeCreation := redis.LogLength(t)
	eventID := s.createEvent(`{"name":"created","seats":5,"slots":1,"mode":"pull"}`)
	if res := s.enter(eventID, "idle"); res.status != http.StatusCreated {
		t.Fatalf("enter: %d %s", res.status, res.raw)
	}
	everyCutLeavesNobodyWaiting(t, s, redis, eventID, beforeCreation)
}

// idleDrops configures a server whose passes run every pushTick and drop a pull user idle for
// about two seconds.
func idleDrops(c *bootstrap.Config) {
	c.Queue.Tick = pushTick
	c.Queue.IdleTimeout = 1500 * time.Millisecond
	c.Queue.PollInterval = 500 * time.Millisecond
}

// everyCutLeavesNobodyWaiting restarts redis from its log cut at the start of each write since
// from, latest first, and at the end: each time, the server's passes leave nobody waiting in
// eventID's room (idleDrops), none of whose users polls. Each cut is a prefix of the one
// before, so the writes of the restarts are cut back again.
func everyCutLeavesNobodyWaiting(t *testing.T, s *server, redis *testenv.PrivateRedis, eventID string, from int64) {
	t.Helper()
	cuts := []int64{redis.LogLength(t)}
	for _, w := range readLog(t, redis, from) {
		cuts = append(cuts, w.start)
	}
	slices.Sort(cuts)
	slices.Reverse(cuts)
	for _, cut := range slices.Compact(cuts) {
		redis.RestartFromLog(t, cut)
		testkit.Eventually(t, 2*time.Second+10*pushTick+testkitSlack, fmt.Sprintf("nobody waiting, the log cut at %d", cut), func() error {
			return s.queueView(eventID).hasNums(map[string]int{"waiting": 0})
		})
	}
}

// loggedWrite is one write of a Redis append-only file, a MULTI … EXEC block (a script's
// writes) as one: where it starts, and its commands' arguments.
type loggedWrite struct {
	start int64
	args  [][]string
}

// readLog reads the writes of redis's append-only file from offset, one at a write's start; a
// write Redis is still appending is left out.
func readLog(t *testing.T, redis *testenv.PrivateRedis, offset int64) []loggedWrite {
	t.Helper()
	data, err := os.ReadFile(redis.LogPath(t))
	if err != nil {
		t.Fatal(err)
	}
	data = data[offset:]
	// number reads the line "*n" or "$n" at data's start as n; false once data ends before it.
	number := func(prefix string) (int, bool) {
		end := bytes.Index(data, []byte("\r\n"))
		if end < 0 {
			return 0, false
		}
		n, err := strconv.Atoi(string(data[1:end]))
		if err != nil || !bytes.HasPrefix(data, []byte(prefix)) {
			t.Fatalf("the append-only file at %d: %q, want a %q line", offset, data[:end], prefix)
		}
		data, offset = data[end+2:], offset+int64(end)+2
		return n, true
	}
	var writes []loggedWrite
	var open *loggedWrite
	for len(data) > 0 {
		start := offset
		n, ok := number("*")
		args := make([]string, n)
		for i := 0; ok && i < n; i++ {
			var size int
			if size, ok = number("$"); ok && len(data) >= size+2 {
				args[i] = string(data[:size])
				data, offset = data[size+2:], offset+int64(size)+2
			} else {
				ok = false
			}
		}
		if !ok {
			break
		}
		switch strings.ToUpper(args[0]) {
		case "MULTI":
			open = &loggedWrite{start: start}
		case "EXEC":
			if open != nil {
				writes = append(writes, *open)
			}
			open = nil
		default:
			if open != nil {
				open.args = append(open.args, args)
			} else {
				writes = append(writes, loggedWrite{start: start, args: [][]string{args}})
			}
		}
	}
	return writes
}

// unlistedIn is nil once log holds the expiry of eventID's room, given by the pass that found
// it empty, followed by a write of the index of events in use, the one key outside the room's
// that names the event.
func unlistedIn(log []loggedWrite, eventID string) error {
	expiring := false
	for _, w := range log {
		for _, args := range w.args {
			switch {
			case strings.EqualFold(args[0], "PEXPIREAT") && strings.HasSuffix(args[1], "{"+eventID+"}:meta"):
				expiring = true
			case expiring && slices.Contains(args[1:], eventID):
				return nil
			}
		}
	}
	return fmt.Errorf("the room of %s not unlisted yet (expiring: %v)", eventID, expiring)
}
