package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain/draw"
	"github.com/rushgate/rushgate/test/testkit"
)

// prequeueOpensIn is how far ahead the tests' pre-queues open: room for every early entry to
// be answered first on a loaded machine.
const prequeueOpensIn = 8 * time.Second

// prequeueEvent creates an event with a pre-queue opening after prequeueOpensIn and answers
// its id and opensAt.
func (s *server) prequeueEvent(mode, order string, seats, slots int) (string, time.Time) {
	s.t.Helper()
	opensAt := time.Now().Add(prequeueOpensIn).UTC().Truncate(time.Millisecond)
	res := s.do("POST", "/admin/events", s.adminToken(), fmt.Sprintf(
		`{"name":"sale day","seats":%d,"slots":%d,"mode":%q,"opensAt":%q,"prequeue":%q}`,
		seats, slots, mode, opensAt.Format(time.RFC3339Nano), order))
	if res.status != http.StatusCreated || res.str("seedHash") == "" || res.str("prequeue") != order || res.body["seed"] != nil {
		s.t.Fatalf("create a pre-queued event: %d %s", res.status, res.raw)
	}
	return res.str("id"), opensAt
}

// publishedSeed waits for GET /events/{eventId} to publish the seed, within the bound, and
// checks it against the commitment.
func (s *server) publishedSeed(eventID string, within time.Duration) draw.Seed {
	s.t.Helper()
	var seed draw.Seed
	testkit.Eventually(s.t, within, "the seed published", func() error {
		res := s.do("GET", "/events/"+eventID, s.token("anyone"), "")
		if res.status != http.StatusOK || res.str("seed") == "" {
			return fmt.Errorf("%d %s", res.status, res.raw)
		}
		parsed, err := draw.ParseSeed(res.str("seed"))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(parsed.Bytes())
		if hex.EncodeToString(sum[:]) != res.str("seedHash") {
			s.t.Fatalf("the published seed does not match the commitment: %s", res.raw)
		}
		seed = parsed
		return nil
	})
	return seed
}

// drawOrder is the early users in the order the published seed gives them, recomputed here
// from the public data alone: tickets hex(SHA-256(seed ‖ ":" ‖ userId)) ascending.
func drawOrder(seed draw.Seed, users []string) []string {
	tickets := make(map[string]string, len(users))
	for _, u := range users {
		sum := sha256.Sum256(append(append(seed.Bytes(), ':'), u...))
		tickets[u] = hex.EncodeToString(sum[:])
	}
	order := slices.Clone(users)
	slices.SortFunc(order, func(a, b string) int {
		if tickets[a] < tickets[b] {
			return -1
		}
		return 1
	})
	return order
}

// TestPrequeue_ConcurrentEntriesTwoInstancesOneOpening: on every backend, many users enter a
// pull pre-queue at once through two instances (one on memory, which cannot share); before
// opensAt each is answered prequeue without a rank, nobody can claim and the seed stays
// unpublished; both instances' workers race at opensAt; then every user has exactly one rank,
// the pre-queue in the draw order recomputed from the published seed and the later arrivals
// FIFO behind, within two queue ticks; and a claim stampede admits exactly the slots' worth, the
// head of that order.
func TestPrequeue_ConcurrentEntriesTwoInstancesOneOpening(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			b.shareStorage(t)
			first := startServer(t, b, pushConfig(0))
			instances := []*server{first}
			if b.databaseURL != "" {
				instances = append(instances, startServer(t, b, pushConfig(0)))
			}
			const users, slots = 120, 7
			eventID, opensAt := first.prequeueEvent("pull", "shuffle", 50, slots)
			early := make([]string, users)
			for i := range early {
				early[i] = fmt.Sprintf("pq-%s-%d", first.run, i)
			}
			answers := make([]response, users)
			testkit.StartTogether(users, func(i int) {
				answers[i] = instances[i%len(instances)].enter(eventID, early[i])
			})
			if time.Now().After(opensAt) {
				t.Fatalf("the entries took past opensAt (%v): raise prequeueOpensIn", prequeueOpensIn)
			}
			for i, res := range answers {
				if res.status != http.StatusCreated || res.str("status") != "prequeue" || res.body["rank"] != nil ||
					res.body["aheadCount"] != nil || res.str("seedHash") == "" || res.str("opensAt") == "" {
					t.Fatalf("entry %d: %d %s", i, res.status, res.raw)
				}
			}
			if res := first.enter(eventID, early[0]); res.status != http.StatusOK || res.str("status") != "prequeue" {
				t.Fatalf("repeated entry: %d %s", res.status, res.raw)
			}
			if res := instances[len(instances)-1].claim(eventID, early[1]); res.status != http.StatusConflict || res.str("error") != "NOT_READY" {
				t.Fatalf("a claim before opensAt: %d %s", res.status, res.raw)
			}
			if v := first.queueView(eventID); v.num("waiting") != users || v.num("prequeued") != users || v.num("admitted") != 0 {
				t.Fatalf("queue before opensAt: %s, want every pre-queued user waiting", v.raw)
			}
			if res := first.do("GET", "/events/"+eventID, first.token("anyone"), ""); res.status != http.StatusOK ||
				res.body["seed"] != nil || res.str("seedHash") == "" || res.body["soldOut"] != false {
				t.Fatalf("GET /events before opensAt: %d %s", res.status, res.raw)
			}

			time.Sleep(time.Until(opensAt))
			late := []string{"late-b-" + first.run, "late-a-" + first.run}
			for _, u := range late {
				if res := first.enter(eventID, u); res.status != http.StatusCreated {
					t.Fatalf("a later arrival: %d %s", res.status, res.raw)
				}
			}
			seed := first.publishedSeed(eventID, 2*pushTick+testkitSlack)
			want := append(drawOrder(seed, early), late...)
			for rank, u := range want {
				res := instances[rank%len(instances)].queueStatus(eventID, u)
				if res.status != http.StatusOK || res.body["rank"] == nil || res.num("rank") != rank {
					t.Fatalf("%s should be at rank %d: %d %s", u, rank, res.status, res.raw)
				}
			}

			claimed := make([]bool, len(want))
			testkit.StartTogether(len(want), func(i int) {
				res := instances[i%len(instances)].claim(eventID, want[i])
				claimed[i] = res.status == http.StatusCreated
			})
			for i, ok := range claimed {
				if ok != (i < slots) {
					t.Fatalf("rank %d claimed %v with %d slots", i, ok, slots)
				}
			}
			if v := first.queueView(eventID); v.num("admitted") != slots || v.num("waiting") != len(want)-slots {
				t.Fatalf("queue after the claims: %s", v.raw)
			}
		})
	}
}

// testkitSlack bounds what a loaded machine adds to a timing bound derived from the settings:
// the request that observes it and the scheduling of the worker's tick.
const testkitSlack = 3 * time.Second

// TestPrequeue_PushStreamsAdmittedInDrawOrder: on every backend, push users connected through
// two instances before opensAt are told `prequeue` and nobody is admitted; after opensAt the
// admissions follow the draw order recomputed from the published seed, never more than the
// slots at once.
func TestPrequeue_PushStreamsAdmittedInDrawOrder(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			b.shareStorage(t)
			first := startServer(t, b, pushConfig(0))
			instances := []*server{first}
			if b.databaseURL != "" {
				instances = append(instances, startServer(t, b, pushConfig(0)))
			}
			const users, slots = 16, 3
			eventID, opensAt := first.prequeueEvent("push", "shuffle", users, slots)
			early := make([]string, users)
			clients := make(map[string]*sseClient, users)
			var mu sync.Mutex
			for i := range early {
				early[i] = fmt.Sprintf("pqs-%s-%d", first.run, i)
			}
			testkit.StartTogether(users, func(i int) {
				c := instances[i%len(instances)].openStream(eventID, early[i])
				mu.Lock()
				clients[early[i]] = c
				mu.Unlock()
			})
			for _, u := range early {
				c := clients[u]
				testkit.Eventually(t, 5*time.Second, u+" told prequeue", func() error {
					c.mu.Lock()
					defer c.mu.Unlock()
					if len(c.prequeues) == 0 {
						return fmt.Errorf("no prequeue event")
					}
					return nil
				})
			}
			if time.Now().After(opensAt) {
				t.Fatalf("the streams took past opensAt (%v): raise prequeueOpensIn", prequeueOpensIn)
			}
			for _, c := range clients {
				if c.token() != "" || c.lastRank() != -1 {
					t.Fatalf("%s admitted or ranked before opensAt", c.user)
				}
			}
			seed := first.publishedSeed(eventID, time.Until(opensAt)+2*pushTick+testkitSlack)
			order := drawOrder(seed, early)
			for next, u := range order {
				testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%s (draw rank %d) admitted", u, next), clients[u].isAdmitted)
				if v := first.queueView(eventID); v.num("admitted") > slots {
					t.Fatalf("more admitted than slots: %s", v.raw)
				}
				for _, later := range order[min(next+slots, len(order)):] {
					if clients[later].token() != "" {
						t.Fatalf("%s admitted before %s left a slot", later, u)
					}
				}
				clients[u].close()
			}
		})
	}
}

// TestPrequeue_KilledOpenerCompletesOnceAfterRestart: on Postgres and MySQL with Redis, the only
// instance is frozen just before opensAt and killed with kill -9 after it, so the pre-queue is
// not placed; successors are killed soon after they start, wherever they are in their first
// passes; the last one places it. Every user has exactly one rank, in the draw order
// recomputed from the published seed, and Redis holds the placing once.
func TestPrequeue_KilledOpenerCompletesOnceAfterRestart(t *testing.T) {
	for _, db := range processDatabases {
		t.Run(db.name, func(t *testing.T) {
			env := processEnv(t, db.fresh(t).URL)
			procA := startProcess(t, env, "opener-a", "all")
			a := procA.client(t)
			eventID, opensAt := a.prequeueEvent("pull", "shuffle", 40, 5)
			early := make([]string, 30)
			for i := range early {
				early[i] = fmt.Sprintf("pqk-%s-%d", a.run, i)
				if res := a.enter(eventID, early[i]); res.status != http.StatusCreated || res.str("status") != "prequeue" {
					t.Fatalf("entry %d: %d %s", i, res.status, res.raw)
				}
			}
			time.Sleep(time.Until(opensAt.Add(-300 * time.Millisecond)))
			procA.freeze(t)
			time.Sleep(time.Until(opensAt.Add(300 * time.Millisecond)))
			procA.kill()

			meta := keyPrefix(t) + "{" + eventID + "}:meta"
			rdb := redisClient(t, redisURL(t))
			opened := func() string { return rdb.HGet(t.Context(), meta, "opened").Val() }
			if opened() != "" {
				t.Fatal("the frozen instance placed the pre-queue")
			}
			for round := range 3 {
				p := startProcess(t, env, fmt.Sprintf("opener-%d", round), "all")
				time.Sleep(time.Duration(round*37) * time.Millisecond)
				p.kill()
			}
			last := startProcess(t, env, "opener-last", "all").client(t)
			seed := last.publishedSeed(eventID, 2*pushTick+testkitSlack)
			if opened() != "1" {
				t.Fatalf("Redis does not hold the placing: %q", opened())
			}
			for rank, u := range drawOrder(seed, early) {
				res := last.queueStatus(eventID, u)
				if res.status != http.StatusOK || res.body["rank"] == nil || res.num("rank") != rank {
					t.Fatalf("%s should be at rank %d: %d %s", u, rank, res.status, res.raw)
				}
			}
			if v := last.queueView(eventID); v.num("waiting") != len(early) || v.num("admitted") != 0 {
				t.Fatalf("queue after the opening: %s", v.raw)
			}
		})
	}
}
