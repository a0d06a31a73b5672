package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// createEvent creates an event through the admin route and returns its id.
func (s *server) createEvent(body string) string {
	s.t.Helper()
	res := s.do("POST", "/admin/events", s.adminToken(), body)
	if res.status != http.StatusCreated || res.str("id") == "" {
		s.t.Fatalf("create event: %d %s", res.status, res.raw)
	}
	return res.str("id")
}

func (s *server) enter(eventID, user string) response {
	return s.do("POST", "/events/"+eventID+"/queue", s.token(user), "")
}

func (s *server) queueStatus(eventID, user string) response {
	return s.do("GET", "/events/"+eventID+"/queue/status", s.token(user), "")
}

func (s *server) claim(eventID, user string) response {
	return s.do("POST", "/events/"+eventID+"/queue/token", s.token(user), "")
}

func (s *server) giveBack(eventID, user string) response {
	return s.do("DELETE", "/events/"+eventID+"/queue/token", s.token(user), "")
}

func (s *server) reserve(eventID, seat, user, entryToken string) response {
	return s.do("POST", "/events/"+eventID+"/seats/"+seat+"/reservations", s.token(user), "", "Entry-Token", entryToken)
}

// admit enters user and claims a token, which must be granted.
func (s *server) admit(eventID, user string) string {
	s.t.Helper()
	if res := s.enter(eventID, user); res.status != http.StatusCreated {
		s.t.Fatalf("enter %s: %d %s", user, res.status, res.raw)
	}
	res := s.claim(eventID, user)
	if res.status != http.StatusCreated || res.str("token") == "" {
		s.t.Fatalf("claim %s: %d %s", user, res.status, res.raw)
	}
	return res.str("token")
}

// seatState is what an event's seats and reservations hold, read from the database (or, on
// memory, from the seat list and the server's own reservation store: a seat booked twice shows
// as more reservations than reserved seats).
type seatState struct {
	reservations, reservedSeats, distinctSeats int
}

func (s *server) seatState(eventID string, seats int) seatState {
	s.t.Helper()
	if s.db == nil {
		page := s.do("GET", fmt.Sprintf("/events/%s/seats?limit=%d", eventID, seats), s.token("reader"), "")
		items, _ := page.body["items"].([]any)
		st := seatState{}
		for _, it := range items {
			if it.(map[string]any)["reserved"] == true {
				st.reservedSeats++
			}
		}
		n, err := s.stores.Reservations.Count(context.Background(), eventID)
		if err != nil {
			s.t.Fatal(err)
		}
		st.reservations, st.distinctSeats = n, st.reservedSeats
		return st
	}
	var st seatState
	q := s.query("SELECT COUNT(*), COUNT(DISTINCT seat_no) FROM reservations WHERE event_id = ?")
	if err := s.db.QueryRow(q, eventID).Scan(&st.reservations, &st.distinctSeats); err != nil {
		s.t.Fatal(err)
	}
	q = s.query("SELECT COUNT(*) FROM seats WHERE event_id = ? AND reserved = ?")
	if err := s.db.QueryRow(q, eventID, true).Scan(&st.reservedSeats); err != nil {
		s.t.Fatal(err)
	}
	return st
}

func assertPlace(t *testing.T, res response, status int, state string, rank, ahead int) {
	t.Helper()
	if res.status != status || res.str("status") != state || res.num("rank") != rank || res.num("aheadCount") != ahead {
		t.Fatalf("want %d %s rank %d ahead %d, got %d %s", status, state, rank, ahead, res.status, res.raw)
	}
}

// pullFlow walks the pull mode with one slot.
func pullFlow(t *testing.T, s *server) {
	eventID := s.createEvent(`{"name":"pull","seats":3,"slots":1,"mode":"pull"}`)
	assertPlace(t, s.enter(eventID, "alice"), http.StatusCreated, "ready", 0, 0)
	assertPlace(t, s.enter(eventID, "bob"), http.StatusCreated, "waiting", 1, 1)
	assertPlace(t, s.enter(eventID, "alice"), http.StatusOK, "ready", 0, 0)

	early := s.claim(eventID, "bob")
	assertError(t, early, http.StatusConflict, "NOT_READY")
	if early.num("rank") != 1 || early.num("aheadCount") != 1 {
		t.Fatalf("NOT_READY details: %s", early.raw)
	}
	first := s.claim(eventID, "alice")
	if first.status != http.StatusCreated || first.str("token") == "" || first.str("expiresAt") == "" {
		t.Fatalf("claim: %d %s", first.status, first.raw)
	}
	again := s.claim(eventID, "alice")
	if again.status != http.StatusOK || again.str("token") != first.str("token") {
		t.Fatalf("second claim: %d %s", again.status, again.raw)
	}
	assertPlace(t, s.queueStatus(eventID, "alice"), http.StatusOK, "entered", 0, 0)
	assertPlace(t, s.enter(eventID, "alice"), http.StatusOK, "entered", 0, 0)
	assertPlace(t, s.queueStatus(eventID, "bob"), http.StatusOK, "waiting", 0, 1)

	for range 2 {
		if res := s.giveBack(eventID, "alice"); res.status != http.StatusNoContent {
			t.Fatalf("return: %d %s", res.status, res.raw)
		}
	}
	assertPlace(t, s.queueStatus(eventID, "bob"), http.StatusOK, "ready", 0, 0)
	bob := s.claim(eventID, "bob")
	if bob.status != http.StatusCreated {
		t.Fatalf("bob's claim: %d %s", bob.status, bob.raw)
	}
	assertError(t, s.reserve(eventID, "2", "alice", first.str("token")), http.StatusForbidden, "ENTRY_TOKEN_REQUIRED")
	seat := s.reserve(eventID, "2", "bob", bob.str("token"))
	if seat.status != http.StatusCreated || seat.str("seatId") != "2" || seat.str("userId") != "bob" || seat.str("eventId") != eventID {
		t.Fatalf("reserve: %d %s", seat.status, seat.raw)
	}
	queue := s.do("GET", "/admin/events/"+eventID+"/queue", s.adminToken(), "")
	if queue.status != http.StatusOK || queue.num("waiting") != 0 || queue.num("admitted") != 1 ||
		queue.num("remainingSlots") != 0 || queue.num("remainingSeats") != 2 || queue.num("returned") != 1 {
		t.Fatalf("queue: %d %s", queue.status, queue.raw)
	}
}

func TestWaiting_PullModeFlow(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			pullFlow(t, startServer(t, b))
		})
	}
}

// seatStampede: users admitted users race for seats seats at once, many on the same seat.
// Exactly one reservation per seat; every answer is 201 or 409; the database agrees.
func seatStampede(t *testing.T, s *server, users, seats int) {
	eventID := s.createEvent(fmt.Sprintf(`{"name":"stampede","seats":%d,"slots":%d,"mode":"pull"}`, seats, users))
	// Admitting everyone is preparation, not the stampede under test: 50 at a time.
	tokens := make([]string, users)
	for first := 0; first < users; first += 50 {
		_, admitted := fire(min(50, users-first), func(i int) response {
			user := fmt.Sprintf("fan-%d", first+i)
			if res := s.enter(eventID, user); res.status != http.StatusCreated {
				return res
			}
			return s.claim(eventID, user)
		})
		for i, res := range admitted {
			if res.status != http.StatusCreated {
				t.Fatalf("fan-%d: %d %s", first+i, res.status, res.raw)
			}
			tokens[first+i] = res.str("token")
		}
	}
	assertError(t, s.reserve(eventID, "1", "fan-0", ""), http.StatusForbidden, "ENTRY_TOKEN_REQUIRED")

	counts, answers := fire(users, func(i int) response {
		return s.reserve(eventID, fmt.Sprint(i%seats+1), fmt.Sprintf("fan-%d", i), tokens[i])
	})
	t.Logf("statuses: %v", counts)
	codes := map[string]int{}
	for _, a := range answers {
		if a.status == http.StatusConflict {
			codes[a.str("error")]++
			continue
		}
		if a.status != http.StatusCreated {
			t.Fatalf("unexpected answer %d %s", a.status, a.raw)
		}
	}
	t.Logf("409 codes: %v", codes)
	for code := range codes {
		if code != "SEAT_ALREADY_RESERVED" && code != "SEAT_BEING_SELECTED" && code != "SOLD_OUT" {
			t.Fatalf("unexpected 409 %s", code)
		}
	}
	if counts[http.StatusCreated] != seats {
		t.Fatalf("%d reservations answered 201, want %d", counts[http.StatusCreated], seats)
	}
	if st := s.seatState(eventID, seats); st.reservations != seats || st.distinctSeats != seats || st.reservedSeats != seats {
		t.Fatalf("invariant broken: %+v", st)
	}
	assertError(t, s.reserve(eventID, "1", "fan-0", tokens[0]), http.StatusConflict, "SOLD_OUT")
}

func TestWaiting_SeatStampedeReservesEachSeatOnce(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			seatStampede(t, startServer(t, b), 500, 20)
		})
	}
}

// TestWaiting_RedisCluster: the server on a redis:// cluster URL (three masters) runs the pull
// flow and a seat stampede: every waiting-room script keeps to its event's hash slot.
func TestWaiting_RedisCluster(t *testing.T) {
	s := startServer(t, backend{name: "postgres+redis-cluster", databaseURL: testenv.Postgres(t).URL, redisURL: testenv.RedisCluster(t)})
	pullFlow(t, s)
	seatStampede(t, s, 200, 10)
}

func TestWaiting_BadInputChangesNothing(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b)
			small := s.createEvent(`{"name":"small","seats":2,"mode":"pull"}`)
			large := s.createEvent(`{"name":"large","seats":10,"mode":"pull"}`)
			push := s.createEvent(`{"name":"push","seats":2,"mode":"push"}`)
			unknown := "00000000-0000-7000-8000-000000000000"
			smallToken := s.admit(small, "alice")
			largeToken := s.admit(large, "alice")
			s.admit(small, "bob")

			for _, path := range []string{"/queue", "/queue/token", "/seats/1/reservations"} {
				assertError(t, s.do("POST", "/events/"+unknown+path, s.token("alice"), "", "Entry-Token", smallToken), http.StatusNotFound, "EVENT_NOT_FOUND")
			}
			assertError(t, s.queueStatus(unknown, "alice"), http.StatusNotFound, "EVENT_NOT_FOUND")
			assertError(t, s.do("DELETE", "/events/"+unknown+"/queue/token", s.token("alice"), ""), http.StatusNotFound, "EVENT_NOT_FOUND")
			assertError(t, s.do("GET", "/events/"+unknown+"/seats", s.token("alice"), ""), http.StatusNotFound, "EVENT_NOT_FOUND")
			assertError(t, s.do("GET", "/admin/events/"+unknown+"/queue", s.adminToken(), ""), http.StatusNotFound, "EVENT_NOT_FOUND")
			assertError(t, s.do("PATCH", "/admin/events/"+unknown, s.adminToken(), `{"slots":3}`), http.StatusNotFound, "EVENT_NOT_FOUND")
			assertError(t, s.enter("not-a-uuid", "alice"), http.StatusBadRequest, "VALIDATION_FAILED")

			// A seat of another event, or no seat at all.
			assertError(t, s.reserve(small, "5", "alice", smallToken), http.StatusNotFound, "SEAT_NOT_FOUND")
			assertError(t, s.reserve(small, "abc", "alice", smallToken), http.StatusNotFound, "SEAT_NOT_FOUND")
			assertError(t, s.reserve(small, "01", "alice", smallToken), http.StatusNotFound, "SEAT_NOT_FOUND")
			// Tokens of another event, another user, or none.
			assertError(t, s.reserve(small, "1", "alice", largeToken), http.StatusForbidden, "ENTRY_TOKEN_REQUIRED")
			assertError(t, s.reserve(small, "1", "bob", smallToken), http.StatusForbidden, "ENTRY_TOKEN_REQUIRED")
			assertError(t, s.reserve(small, "1", "alice", ""), http.StatusForbidden, "ENTRY_TOKEN_REQUIRED")
			assertError(t, s.reserve(small, "1", "carol", "made-up"), http.StatusForbidden, "ENTRY_TOKEN_REQUIRED")

			// Not in the queue.
			assertError(t, s.claim(small, "carol"), http.StatusNotFound, "NOT_IN_QUEUE")
			assertError(t, s.queueStatus(small, "carol"), http.StatusNotFound, "NOT_IN_QUEUE")
			// The other admission mode.
			assertError(t, s.enter(push, "carol"), http.StatusConflict, "WRONG_ADMISSION_MODE")
			assertError(t, s.claim(push, "carol"), http.StatusConflict, "WRONG_ADMISSION_MODE")
			assertError(t, s.queueStatus(push, "carol"), http.StatusConflict, "WRONG_ADMISSION_MODE")
			assertError(t, s.do("DELETE", "/events/"+push+"/queue/token", s.token("carol"), ""), http.StatusConflict, "WRONG_ADMISSION_MODE")

			// Bodies.
			for body, field := range map[string]string{
				`{"name":"x","seats":0,"mode":"pull"}`:                  "seats",
				`{"name":"x","seats":100001,"mode":"pull"}`:             "seats",
				`{"name":"x","seats":2,"mode":"sse"}`:                   "mode",
				`{"name":"x","seats":2,"mode":"pull","slots":0}`:        "slots",
				`{"name":"x","seats":2,"mode":"pull","tokenTtl":"x"}`:   "tokenTtl",
				`{"name":"x","seats":2,"mode":"pull","tokenTtl":"-1m"}`: "tokenTtl",
				`{"name":"","seats":2,"mode":"pull"}`:                   "name",
				`{"name":"x","seats":"2","mode":"pull"}`:                "seats",
				`{"name":"x","seats":2,"mode":"pull","extra":1}`:        "extra",
			} {
				res := s.do("POST", "/admin/events", s.adminToken(), body)
				assertError(t, res, http.StatusBadRequest, "VALIDATION_FAILED")
				if res.str("field") != field {
					t.Errorf("%s: field %q, want %q", body, res.str("field"), field)
				}
			}
			assertError(t, s.do("PATCH", "/admin/events/"+small, s.adminToken(), `{"slots":0}`), http.StatusBadRequest, "VALIDATION_FAILED")
			assertError(t, s.do("PATCH", "/admin/events/"+small, s.adminToken(), `{}`), http.StatusBadRequest, "VALIDATION_FAILED")
			assertError(t, s.do("PATCH", "/admin/events/"+small, s.adminToken(), `{"slots":3,"seats":9}`), http.StatusBadRequest, "VALIDATION_FAILED")
			assertError(t, s.do("POST", "/admin/events", s.token("alice"), `{"name":"x","seats":2,"mode":"pull"}`), http.StatusForbidden, "FORBIDDEN")
			assertError(t, s.do("POST", "/events/"+small+"/queue", s.token("alice"), `{"userId":"x"}`), http.StatusBadRequest, "VALIDATION_FAILED")
			assertError(t, s.do("GET", "/events/"+small+"/seats?limit=0", s.token("alice"), ""), http.StatusBadRequest, "VALIDATION_FAILED")
			assertError(t, s.do("GET", "/events/"+small+"/seats?cursor=zz", s.token("alice"), ""), http.StatusBadRequest, "VALIDATION_FAILED")

			// Nothing changed: no seat reserved, both still admitted, the queue as it was.
			for _, ev := range []struct {
				id    string
				seats int
			}{{small, 2}, {large, 10}} {
				if st := s.seatState(ev.id, ev.seats); st != (seatState{}) {
					t.Fatalf("bad input reserved something: %+v", st)
				}
			}
			queue := s.do("GET", "/admin/events/"+small+"/queue", s.adminToken(), "")
			if queue.num("admitted") != 2 || queue.num("waiting") != 0 || queue.num("slots") != 2 {
				t.Fatalf("queue changed: %s", queue.raw)
			}
		})
	}
}

func TestWaiting_SeatsArePagedByNumber(t *testing.T) {
	s := startServer(t, backends(t)[0])
	eventID := s.createEvent(`{"name":"paged","seats":5,"mode":"pull"}`)
	var ids []string
	cursor := ""
	for {
		page := s.do("GET", "/events/"+eventID+"/seats?limit=2"+cursor, s.token("reader"), "")
		for _, it := range page.body["items"].([]any) {
			ids = append(ids, it.(map[string]any)["id"].(string))
		}
		next, ok := page.body["nextCursor"].(string)
		if !ok {
			break
		}
		cursor = "&cursor=" + next
	}
	if fmt.Sprint(ids) != "[1 2 3 4 5]" {
		t.Fatalf("seats %v", ids)
	}
}

func TestWaiting_PatchSlotsRecalibratesLive(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b)
			eventID := s.createEvent(`{"name":"patch","seats":10,"slots":1,"mode":"pull"}`)
			s.admit(eventID, "alice")
			assertPlace(t, s.enter(eventID, "bob"), http.StatusCreated, "waiting", 0, 1)
			res := s.do("PATCH", "/admin/events/"+eventID, s.adminToken(), `{"slots":2}`)
			if res.status != http.StatusOK || res.num("slots") != 2 || res.str("id") != eventID {
				t.Fatalf("patch: %d %s", res.status, res.raw)
			}
			assertPlace(t, s.queueStatus(eventID, "bob"), http.StatusOK, "ready", 0, 0)
			if c := s.claim(eventID, "bob"); c.status != http.StatusCreated {
				t.Fatalf("bob: %d %s", c.status, c.raw)
			}
			s.do("PATCH", "/admin/events/"+eventID, s.adminToken(), `{"slots":1}`)
			assertPlace(t, s.enter(eventID, "carol"), http.StatusCreated, "waiting", 0, 1)
			s.giveBack(eventID, "alice")
			assertPlace(t, s.queueStatus(eventID, "carol"), http.StatusOK, "waiting", 0, 1)
			s.giveBack(eventID, "bob")
			assertPlace(t, s.queueStatus(eventID, "carol"), http.StatusOK, "ready", 0, 0)
		})
	}
}

// TestWaiting_ExpiredTokensAndIdleUsersFreeTheLine: a token that expires gives its slot back
// (the next user gets in and the old token stops working), and a waiting user who stops
// polling is dropped by the workers so the head of the line moves.
func TestWaiting_ExpiredTokensAndIdleUsersFreeTheLine(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b, func(c *bootstrap.Config) {
				c.Queue.Tick = 100 * time.Millisecond
				c.Queue.IdleTimeout = 1500 * time.Millisecond
				c.Queue.PollInterval = 500 * time.Millisecond
			})
			eventID := s.createEvent(`{"name":"expiry","seats":5,"slots":1,"mode":"pull","tokenTtl":"1s"}`)
			token := s.admit(eventID, "alice")
			assertPlace(t, s.enter(eventID, "gone"), http.StatusCreated, "waiting", 0, 1)
			assertPlace(t, s.enter(eventID, "bob"), http.StatusCreated, "waiting", 1, 2)
			// bob keeps polling; "gone" never does again, and alice's token runs out.
			testkit.Eventually(t, 10*time.Second, "bob reaches the head, ready", func() error {
				if res := s.queueStatus(eventID, "bob"); res.str("status") != "ready" {
					return fmt.Errorf("bob's status: %d %s", res.status, res.raw)
				}
				return nil
			})
			assertError(t, s.queueStatus(eventID, "gone"), http.StatusNotFound, "NOT_IN_QUEUE")
			assertError(t, s.reserve(eventID, "1", "alice", token), http.StatusForbidden, "ENTRY_TOKEN_REQUIRED")
			queue := s.do("GET", "/admin/events/"+eventID+"/queue", s.adminToken(), "")
			if queue.num("expiredReconciled") != 1 || queue.num("droppedIdle") != 1 || queue.num("admitted") != 0 {
				t.Fatalf("queue: %s", queue.raw)
			}
		})
	}
}
