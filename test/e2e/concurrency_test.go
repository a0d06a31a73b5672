package e2e

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/rushgate/rushgate/test/testkit"
)

// fire sends n requests at once (released together) and counts the statuses.
func fire(n int, send func(i int) response) (map[int]int, []response) {
	answers := make([]response, n)
	testkit.StartTogether(n, func(i int) { answers[i] = send(i) })
	counts := map[int]int{}
	for _, a := range answers {
		counts[a.status]++
	}
	return counts, answers
}

// stampede sends users distinct users at once to join one new crew of capacity seats, spread
// round-robin over instances (servers on one database and one coordination backend), and checks
// the crew fills exactly: capacity × 201, every other answer 400 CREW_FULL, and in the database
// currentMembers == count(members) == distinct users == capacity. Queued behind the lock holder
// and served in batches, no join waits out the backoff schedule, so a 429 here means the queue
// or the early CREW_FULL stopped working.
func stampede(t *testing.T, instances []*server, users, capacity int) {
	t.Helper()
	first := instances[0]
	crewID := first.createCrew(capacity)
	tokens := make([]string, users)
	for i := range tokens {
		tokens[i] = first.token(fmt.Sprintf("herd-%d", i))
	}
	counts, answers := fire(users, func(i int) response {
		return instances[i%len(instances)].do("POST", "/crews/"+crewID+"/join", tokens[i], "", "Idempotency-Key", first.run+"herd")
	})
	t.Logf("statuses: %v", counts)
	for _, a := range answers {
		if a.status != http.StatusCreated && (a.status != http.StatusBadRequest || a.str("error") != "CREW_FULL") {
			t.Fatalf("unexpected answer %d %s (all: %v)", a.status, a.raw, counts)
		}
	}
	if counts[http.StatusCreated] != capacity {
		t.Fatalf("%d joins succeeded, want exactly %d (statuses %v)", counts[http.StatusCreated], capacity, counts)
	}
	if st := instances[len(instances)-1].stored(crewID); st.currentMembers != capacity || st.members != capacity || st.distinctUsers != capacity {
		t.Fatalf("invariant broken: %+v", st)
	}
}

// TestJoin_StampedeOfDistinctUsersFillsExactly: 500 users race for 50 seats.
func TestJoin_StampedeOfDistinctUsersFillsExactly(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			stampede(t, []*server{startServer(t, b)}, 500, 50)
		})
	}
}

// TestJoin_SameKeyStampedeJoinsOnce: one user double-clicks 50 times with one key.
func TestJoin_SameKeyStampedeJoinsOnce(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b)
			crewID := s.createCrew(10)
			token := s.token("clicker")
			counts, answers := fire(50, func(int) response {
				return s.do("POST", "/crews/"+crewID+"/join", token, "", "Idempotency-Key", s.run+"click")
			})
			t.Logf("statuses: %v", counts)
			fresh := 0
			for _, a := range answers {
				switch {
				case a.status == http.StatusCreated && a.header.Get("Idempotent-Replayed") == "true":
				case a.status == http.StatusCreated:
					fresh++
				case a.status == http.StatusConflict && a.str("error") == "IDEMPOTENCY_IN_PROGRESS":
				default:
					t.Fatalf("unexpected answer %d %s", a.status, a.raw)
				}
			}
			if fresh != 1 {
				t.Fatalf("%d requests ran the join, want 1 (statuses %v)", fresh, counts)
			}
			if st := s.stored(crewID); st.currentMembers != 1 || st.members != 1 {
				t.Fatalf("stored %+v", st)
			}
		})
	}
}

// TestJoin_AStampedeOverManyCrewsFillsEachExactly: 260 joins race for 20 crews of 5 seats, each
// of which already holds one member who asks again with a new key. The batches of different crews
// share transactions; a member asking again fails its shared transaction on the UNIQUE index
// whenever its crew had a seat for every join of the batch, and each batch then runs alone. Each
// crew still fills exactly, the member hears ALREADY_MEMBER, and nobody else hears anything but
// 201 or CREW_FULL.
func TestJoin_AStampedeOverManyCrewsFillsEachExactly(t *testing.T) {
	const crews, capacity, newcomers = 20, 5, 12
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b)
			crewIDs := make([]string, crews)
			members := make([]string, crews)
			for c := range crewIDs {
				crewIDs[c] = s.createCrew(capacity)
				members[c] = s.token(fmt.Sprintf("member-%d", c))
				if a := s.do("POST", "/crews/"+crewIDs[c]+"/join", members[c], "", "Idempotency-Key", s.run+"first"); a.status != http.StatusCreated {
					t.Fatalf("first join of crew %d: %d %s", c, a.status, a.raw)
				}
			}
			const perCrew = newcomers + 1 // the member asking again is the last of its crew
			tokens := make([]string, crews*perCrew)
			for i := range tokens {
				c, n := i%crews, i/crews
				if n == newcomers {
					tokens[i] = members[c]
				} else {
					tokens[i] = s.token(fmt.Sprintf("newcomer-%d-%d", c, n))
				}
			}
			counts, answers := fire(len(tokens), func(i int) response {
				return s.do("POST", "/crews/"+crewIDs[i%crews]+"/join", tokens[i], "", "Idempotency-Key", s.run+"again")
			})
			t.Logf("statuses: %v", counts)
			seated := make([]int, crews)
			for i, a := range answers {
				c, asksAgain := i%crews, i/crews == newcomers
				switch {
				case asksAgain && a.status == http.StatusConflict && a.str("error") == "ALREADY_MEMBER":
				case !asksAgain && a.status == http.StatusCreated:
					seated[c]++
				case !asksAgain && a.status == http.StatusBadRequest && a.str("error") == "CREW_FULL":
				default:
					t.Fatalf("join %d of crew %d (asks again: %v): %d %s", i/crews, c, asksAgain, a.status, a.raw)
				}
			}
			for c, id := range crewIDs {
				if seated[c] != capacity-1 {
					t.Errorf("crew %d seated %d newcomers, want %d", c, seated[c], capacity-1)
				}
				if st := s.stored(id); st.currentMembers != capacity || st.members != capacity || st.distinctUsers != capacity {
					t.Errorf("crew %d: invariant broken: %+v", c, st)
				}
			}
		})
	}
}

// TestJoin_RacingLeavesKeepTheCountExact: members of full crews leave (with a double click: one
// leave answers 204, the other NOT_MEMBER) and, right after their own leave, join again, while newcomers join the same crews; the crews' joins share transactions.
// A leave frees exactly one seat: every leave answers 204, every join 201 or CREW_FULL — a
// member who has just left is no longer a member, so never ALREADY_MEMBER — and each crew ends
// with currentMembers == count(members) <= maxMembers, its members exactly the ones who did
// not leave plus the ones who heard 201.
func TestJoin_RacingLeavesKeepTheCountExact(t *testing.T) {
	const crews, capacity, newcomers = 6, 5, 8
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b)
			crewIDs := make([]string, crews)
			for c := range crewIDs {
				crewIDs[c] = s.createCrew(capacity)
				for m := range capacity {
					if a := s.join(crewIDs[c], fmt.Sprintf("churn-member-%d-%d", c, m), "first"); a.status != http.StatusCreated {
						t.Fatalf("fill crew %d: %d %s", c, a.status, a.raw)
					}
				}
			}
			// Per crew: the members (each leaves, then joins again), then the newcomers.
			const perCrew = capacity + newcomers
			user := func(i int) string {
				c, n := i%crews, i/crews
				if n < capacity {
					return fmt.Sprintf("churn-member-%d-%d", c, n)
				}
				return fmt.Sprintf("churn-newcomer-%d-%d", c, n)
			}
			joined := make([]bool, crews*perCrew)
			_, answers := fire(len(joined), func(i int) response {
				crewID, u := crewIDs[i%crews], user(i)
				if i/crews < capacity {
					// A double click: both leaves at once, one frees the seat.
					var twice [2]response
					testkit.StartTogether(2, func(k int) { twice[k] = s.do("DELETE", "/crews/"+crewID+"/members/me", s.token(u), "") })
					if twice[0].status == http.StatusNoContent {
						twice[0], twice[1] = twice[1], twice[0]
					}
					if twice[0].status != http.StatusNotFound || twice[0].str("error") != "NOT_MEMBER" || twice[1].status != http.StatusNoContent {
						return twice[0]
					}
				}
				a := s.join(crewID, u, "again")
				joined[i] = a.status == http.StatusCreated
				return a
			})
			for i, a := range answers {
				if a.status != http.StatusCreated && (a.status != http.StatusBadRequest || a.str("error") != "CREW_FULL") {
					t.Errorf("%s in crew %d: %d %s", user(i), i%crews, a.status, a.raw)
				}
			}
			for c, crewID := range crewIDs {
				want := map[string]bool{}
				for i := c; i < len(joined); i += crews {
					if joined[i] {
						want[user(i)] = true
					}
				}
				st := s.stored(crewID)
				if st.currentMembers != len(want) || st.members != len(want) || st.distinctUsers != len(want) || st.members > capacity {
					t.Errorf("crew %d: stored %+v, want %d members", c, st, len(want))
				}
				page := s.do("GET", "/crews/"+crewID+"/members?limit=500", s.token("reader"), "")
				items, _ := page.body["items"].([]any)
				for _, it := range items {
					if u := it.(map[string]any)["userId"].(string); !want[u] {
						t.Errorf("crew %d: %s is a member but did not hear 201", c, u)
					}
				}
			}
		})
	}
}
