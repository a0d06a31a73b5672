package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testkit"
)

// sseEvent is one server-sent event: its name and JSON data.
type sseEvent struct {
	name string
	data map[string]any
}

// sseClient is one user's open SSE stream.
type sseClient struct {
	t      *testing.T
	user   string
	cancel context.CancelFunc
	events chan sseEvent
	ended  chan struct{}

	mu        sync.Mutex
	ranks     []int
	admitted  []string // tokens, in order received
	comments  int
	positions []map[string]any
	// prequeues are the data of the `prequeue` events received.
	prequeues []map[string]any
	soldOut   bool
	// replaced: the stream was told a newer connection of its user holds the place.
	replaced bool
}

// pushTick is the queue tick of the push tests: short, so they run in seconds.
const pushTick = 100 * time.Millisecond

func pushConfig(grace time.Duration) func(*bootstrap.Config) {
	return func(cfg *bootstrap.Config) {
		cfg.Queue.Tick = pushTick
		cfg.Queue.ReconnectGrace = grace
		cfg.Queue.SSEHeartbeat = 200 * time.Millisecond
		cfg.Queue.BrokerHeartbeatTimeout = time.Second
	}
}

// streamClient opens the tests' streams: no overall timeout, and idle connections closed as
// newClient's are, at half the default header timeout.
var streamClient = &http.Client{Transport: &http.Transport{
	IdleConnTimeout: bootstrap.DefaultConfig().Server.ReadHeaderTimeout / 2}}

// openStream opens GET /events/{eventId}/tickets/waiting on baseURL with the JWT in the query, as
// a browser's EventSource sends it; it answers the status and, on 200, the open stream.
func openStream(t *testing.T, baseURL, eventID, user, token string) (int, *sseClient) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	u := baseURL + "/events/" + eventID + "/tickets/waiting?access_token=" + url.QueryEscape(token)
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	req.Header.Set("Accept", "text/event-stream")
	res, err := streamClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("open stream of %s: %v", user, err)
	}
	if res.StatusCode != http.StatusOK {
		defer cancel()
		defer res.Body.Close()
		return res.StatusCode, nil
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("stream content type %q", ct)
	}
	c := &sseClient{t: t, user: user, cancel: cancel, events: make(chan sseEvent, 4096), ended: make(chan struct{})}
	go c.read(res)
	t.Cleanup(c.close)
	return http.StatusOK, c
}

// read parses the stream: "event:" and "data:" lines up to a blank line; ":" lines are
// heartbeats.
func (c *sseClient) read(res *http.Response) {
	defer close(c.ended)
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	var name, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, ":"):
			c.mu.Lock()
			c.comments++
			c.mu.Unlock()
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && name != "":
			ev := sseEvent{name: name}
			if err := json.Unmarshal([]byte(data), &ev.data); err != nil {
				c.t.Errorf("%s: event %s data %q: %v", c.user, name, data, err)
			}
			c.record(ev)
			select {
			case c.events <- ev:
			default:
			}
			name, data = "", ""
		}
	}
}

func (c *sseClient) record(ev sseEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ev.name {
	case "position":
		for _, field := range []string{"rank", "aheadCount", "queueSize", "estimatedWaitSeconds"} {
			if _, ok := ev.data[field]; !ok {
				c.t.Errorf("%s: position without %s: %v", c.user, field, ev.data)
			}
		}
		// Admitted, the user never waits again on this connection: a position now would put a
		// waiting page back in line, away from its seats.
		if len(c.admitted) > 0 {
			c.t.Errorf("%s: position after the admission: %v", c.user, ev.data)
		}
		c.ranks = append(c.ranks, int(ev.data["rank"].(float64)))
		c.positions = append(c.positions, ev.data)
	case "admitted":
		token, _ := ev.data["token"].(string)
		if token == "" || ev.data["expiresAt"] == nil {
			c.t.Errorf("%s: admitted without token or expiry: %v", c.user, ev.data)
		}
		c.admitted = append(c.admitted, token)
	case "prequeue":
		if ev.data["opensAt"] == nil || ev.data["seedHash"] == nil {
			c.t.Errorf("%s: prequeue without opensAt or seedHash: %v", c.user, ev.data)
		}
		// Placed in line, the user never waits for the sale to open again: a pre-queue now would
		// put a waiting page back to "the sale opens at…".
		if len(c.positions) > 0 || len(c.admitted) > 0 {
			c.t.Errorf("%s: prequeue after a position or the admission: %v", c.user, ev.data)
		}
		c.prequeues = append(c.prequeues, ev.data)
	case "soldout":
		c.soldOut = true
	case "replaced":
		c.replaced = true
	default:
		c.t.Errorf("%s: unexpected event %q", c.user, ev.name)
	}
}

// token answers the entry token the stream delivered, "" before admission.
func (c *sseClient) token() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.admitted) == 0 {
		return ""
	}
	return c.admitted[len(c.admitted)-1]
}

// lastRank answers the latest rank received, -1 before any.
func (c *sseClient) lastRank() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ranks) == 0 {
		return -1
	}
	return c.ranks[len(c.ranks)-1]
}

// lastPosition answers the latest position's data, nil before any.
func (c *sseClient) lastPosition() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.positions) == 0 {
		return nil
	}
	return c.positions[len(c.positions)-1]
}

// isAdmitted is nil once the stream delivered an entry token, and otherwise says where the
// user last stood: a check for testkit.Eventually.
func (c *sseClient) isAdmitted() error {
	if c.token() == "" {
		return fmt.Errorf("%s not admitted, last position %v", c.user, c.lastPosition())
	}
	return nil
}

// isAtRank is nil when the latest rank received is rank: a check for testkit.Eventually.
func (c *sseClient) isAtRank(rank int) error {
	if got := c.lastRank(); got != rank {
		return fmt.Errorf("%s at rank %d (-1: none yet), want %d", c.user, got, rank)
	}
	return nil
}

// checkRanksNeverRise fails when a later position is further back than an earlier one.
func (c *sseClient) checkRanksNeverRise() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 1; i < len(c.ranks); i++ {
		if c.ranks[i] > c.ranks[i-1] {
			c.t.Errorf("%s: rank rose from %d to %d (%v)", c.user, c.ranks[i-1], c.ranks[i], c.ranks)
			return
		}
	}
}

// distinctTokens is how many different tokens the stream delivered.
func (c *sseClient) distinctTokens() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	for _, tok := range c.admitted {
		seen[tok] = true
	}
	return len(seen)
}

func (c *sseClient) close() {
	c.cancel()
	<-c.ended
}

func (s *server) openStream(eventID, user string) *sseClient {
	s.t.Helper()
	status, c := openStream(s.t, s.url, eventID, user, s.token(user))
	if status != http.StatusOK {
		s.t.Fatalf("open stream of %s: status %d", user, status)
	}
	return c
}

// queueView reads GET /admin/events/{eventId}/queue.
func (s *server) queueView(eventID string) response {
	s.t.Helper()
	res := s.do("GET", "/admin/events/"+eventID+"/queue", s.adminToken(), "")
	if res.status != http.StatusOK {
		s.t.Fatalf("queue view: %d %s", res.status, res.raw)
	}
	return res
}

// pushFlow: users connect in order; the first `slots` are admitted in FIFO order, the rest see
// their rank fall; admitted users reserve and disconnect; the next are admitted; never more
// admitted at once than slots, every user admitted once, every seat reserved once, then sold out.
func pushFlow(t *testing.T, s *server) {
	const users, slots = 9, 3
	eventID := s.createEvent(fmt.Sprintf(`{"name":"push","seats":%d,"slots":%d,"mode":"push"}`, users, slots))
	clients := make([]*sseClient, users)
	for i := range clients {
		clients[i] = s.openStream(eventID, fmt.Sprintf("push-%s%d", s.run, i))
	}
	var admittedOrder []int
	seat := 0
	for wave := 0; wave < users/slots; wave++ {
		first := wave * slots
		for i := first; i < first+slots; i++ {
			testkit.Eventually(t, 5*time.Second, fmt.Sprintf("user %d admitted", i), clients[i].isAdmitted)
			admittedOrder = append(admittedOrder, i)
		}
		// FIFO within the slot limit: nobody behind the wave is admitted while it holds the slots.
		for i := first + slots; i < users; i++ {
			if clients[i].token() != "" {
				t.Fatalf("user %d admitted while users %d..%d hold every slot", i, first, first+slots-1)
			}
		}
		view := s.queueView(eventID)
		if view.num("admitted") != slots || view.num("remainingSlots") != 0 || view.num("waiting") != users-first-slots {
			t.Fatalf("wave %d: queue view %s", wave, view.raw)
		}
		if view.num("connections") != users-first {
			t.Fatalf("wave %d: connections %d, want %d", wave, view.num("connections"), users-first)
		}
		// The ones still waiting are told their place: rank = place among the waiting.
		for i := first + slots; i < users; i++ {
			want := i - first - slots
			testkit.Eventually(t, 3*time.Second, fmt.Sprintf("user %d at rank %d", i, want), func() error { return clients[i].isAtRank(want) })
		}
		for i := first; i < first+slots; i++ {
			seat++
			res := s.reserve(eventID, fmt.Sprint(seat), clients[i].user, clients[i].token())
			if res.status != http.StatusCreated {
				t.Fatalf("user %d reserves seat %d: %d %s", i, seat, res.status, res.raw)
			}
			clients[i].close()
		}
	}
	// Every seat is reserved, so the event is sold out: the room empties and admits nobody more.
	testkit.Eventually(t, 3*time.Second, "the room empties, sold out", func() error {
		view := s.queueView(eventID)
		if soldOut, _ := view.body["soldOut"].(bool); !soldOut {
			return fmt.Errorf("not sold out: %s", view.raw)
		}
		return view.hasNums(map[string]int{"admitted": 0, "waiting": 0, "connections": 0, "remainingSlots": 0})
	})
	for i, c := range clients {
		c.checkRanksNeverRise()
		if c.distinctTokens() != 1 {
			t.Errorf("user %d got %d different tokens", i, c.distinctTokens())
		}
	}
	for i, u := range admittedOrder {
		if i != u {
			t.Fatalf("admission order %v is not FIFO", admittedOrder)
		}
	}
	if v := s.queueView(eventID); v.num("claims") != users || v.num("returned") != users {
		t.Fatalf("claims/returned: %s", v.raw)
	}
	if st := s.seatState(eventID, users); st.reservations != users || st.distinctSeats != users {
		t.Fatalf("seats: %+v", st)
	}
}

func TestPush_FlowAdmitsInOrderWithinSlots(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			pushFlow(t, startServer(t, b, pushConfig(0)))
		})
	}
}

// A user who reconnects within the grace keeps the place, or gets the same admission again;
// one who does not is removed (waiting) or gives the slot back (admitted).
func TestPush_ReconnectGrace(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b, pushConfig(time.Second))
			eventID := s.createEvent(`{"name":"grace","seats":5,"slots":1,"mode":"push"}`)
			head := s.openStream(eventID, "grace-head-"+s.run)
			testkit.Eventually(t, 5*time.Second, "head admitted", head.isAdmitted)
			first := head.token()
			second := s.openStream(eventID, "grace-second-"+s.run)
			testkit.Eventually(t, 3*time.Second, "second at rank 0", func() error { return second.isAtRank(0) })

			// Both drop and come back within the grace: same admission, same place.
			head.close()
			second.close()
			head = s.openStream(eventID, "grace-head-"+s.run)
			second = s.openStream(eventID, "grace-second-"+s.run)
			testkit.Eventually(t, 3*time.Second, "head admitted again", head.isAdmitted)
			if head.token() != first {
				t.Fatalf("reconnected head got token %q, want the same %q", head.token(), first)
			}
			testkit.Eventually(t, 3*time.Second, "second keeps rank 0", func() error { return second.isAtRank(0) })
			// Watched until well past the grace of the dropped connections (1 s), so their
			// departures, whenever they run, must leave both users where they are.
			for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				if v := s.queueView(eventID); v.num("admitted") != 1 || v.num("waiting") != 1 || v.num("claims") != 1 {
					t.Fatalf("after reconnects within the grace: %s", v.raw)
				}
			}
			if second.token() != "" {
				t.Fatal("second admitted while the head kept its slot")
			}

			// The head leaves for good: after the grace its slot goes to the second, and its
			// token no longer reserves.
			head.close()
			testkit.Eventually(t, 5*time.Second, "second admitted after the grace", second.isAdmitted)
			if res := s.reserve(eventID, "1", "grace-head-"+s.run, first); res.status != http.StatusForbidden {
				t.Fatalf("departed head's token reserved: %d %s", res.status, res.raw)
			}
			// The second leaves while admitted: slot back, token deleted.
			token := second.token()
			second.close()
			testkit.Eventually(t, 5*time.Second, "slot back", func() error {
				return s.queueView(eventID).hasNums(map[string]int{"remainingSlots": 1})
			})
			if res := s.reserve(eventID, "1", "grace-second-"+s.run, token); res.status != http.StatusForbidden {
				t.Fatalf("departed second's token reserved: %d %s", res.status, res.raw)
			}
		})
	}
}

// A waiting user who leaves is removed from the queue after the grace.
func TestPush_WaitingUserWhoLeavesIsRemoved(t *testing.T) {
	s := startServer(t, backends(t)[0], pushConfig(200*time.Millisecond))
	eventID := s.createEvent(`{"name":"leave","seats":5,"slots":1,"mode":"push"}`)
	head := s.openStream(eventID, "leave-head")
	testkit.Eventually(t, 5*time.Second, "head admitted", head.isAdmitted)
	waiter := s.openStream(eventID, "leave-waiter")
	testkit.Eventually(t, 3*time.Second, "waiter queued", func() error {
		return s.queueView(eventID).hasNums(map[string]int{"waiting": 1})
	})
	waiter.close()
	testkit.Eventually(t, 3*time.Second, "waiter removed", func() error {
		return s.queueView(eventID).hasNums(map[string]int{"waiting": 0})
	})
	if v := s.queueView(eventID); v.num("admitted") != 1 || v.num("connections") != 1 {
		t.Fatalf("after the waiter left: %s", v.raw)
	}
}

// Heartbeat comments keep an idle stream alive, past the server's read timeout too.
func TestPush_HeartbeatsKeepTheStreamAlive(t *testing.T) {
	s := startServer(t, backends(t)[0], pushConfig(0), func(cfg *bootstrap.Config) { cfg.Server.ReadTimeout = 300 * time.Millisecond })
	eventID := s.createEvent(`{"name":"beat","seats":1,"slots":1,"mode":"push"}`)
	c := s.openStream(eventID, "beat-user")
	testkit.Eventually(t, 5*time.Second, "heartbeats", func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.comments < 8 {
			return fmt.Errorf("%d heartbeats", c.comments)
		}
		return nil
	})
	select {
	case <-c.ended:
		t.Fatal("the stream ended")
	default:
	}
}

// Bad requests to the SSE route answer the JSON errors of every route and queue nobody.
func TestPush_BadRequests(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b, pushConfig(0))
			pull := s.createEvent(`{"name":"pull","seats":1,"mode":"pull"}`)
			push := s.createEvent(`{"name":"push","seats":1,"mode":"push"}`)
			path := func(id string) string { return "/events/" + id + "/tickets/waiting" }
			assertError(t, s.do("GET", path(pull), s.token("bad-1"), ""), http.StatusConflict, "WRONG_ADMISSION_MODE")
			assertError(t, s.do("POST", "/events/"+push+"/queue", s.token("bad-1"), ""), http.StatusConflict, "WRONG_ADMISSION_MODE")
			assertError(t, s.do("GET", path("00000000-0000-4000-8000-000000000000"), s.token("bad-1"), ""), http.StatusNotFound, "EVENT_NOT_FOUND")
			assertError(t, s.do("GET", path("not-a-uuid"), s.token("bad-1"), ""), http.StatusBadRequest, "VALIDATION_FAILED")
			assertError(t, s.do("GET", path(push), "", ""), http.StatusUnauthorized, "UNAUTHORIZED")
			assertError(t, s.do("GET", path(push)+"?access_token=forged", "", ""), http.StatusUnauthorized, "UNAUTHORIZED")
			if v := s.queueView(push); v.num("waiting") != 0 || v.num("admitted") != 0 || v.num("connections") != 0 {
				t.Fatalf("bad requests queued someone: %s", v.raw)
			}
		})
	}
}

// The waiting page is served by rushgate as HTML to anyone: the token it needs comes in its
// fragment, which never reaches the server.
func TestPush_WaitingPageIsServed(t *testing.T) {
	s := startServer(t, backends(t)[0], pushConfig(0))
	eventID := s.createEvent(`{"name":"page","seats":1,"mode":"push"}`)
	res, err := http.Get(s.url + "/events/" + eventID + "/waiting-room")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, res)
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("page: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if !contains(body, "EventSource") || !contains(body, "/waiting-room/session") ||
		contains(body, "http://") || contains(body, "https://") {
		t.Fatal("the page must start a session, open the stream and load nothing from elsewhere")
	}
}

// Stopping the server ends the streams it holds, though they are no longer net/http's to
// close, and does not wait for its shutdown timeout to do so.
func TestPush_StopClosesTheStreams(t *testing.T) {
	cfg := testConfig(backend{name: "memory"})
	pushConfig(0)(&cfg)
	cfg.Server.ShutdownTimeout = time.Minute
	var srv *bootstrap.Server
	app := fxtest.New(t, modules(t, cfg), fx.Populate(&srv))
	app.RequireStart()
	t.Cleanup(func() { _ = stopWithin(app, 30*time.Second) }) // when the test fails before its own stop
	s := &server{t: t, url: srv.URL(), tokens: rghttp.NewTokens([]byte(jwtSecret)), http: newClient(cfg.Server.ReadHeaderTimeout)}
	eventID := s.createEvent(`{"name":"stop","seats":2,"slots":1,"mode":"push"}`)
	admitted := s.openStream(eventID, "stop-admitted")
	waiting := s.openStream(eventID, "stop-waiting")
	testkit.Eventually(t, 5*time.Second, "one admitted, one waiting", func() error {
		return errors.Join(admitted.isAdmitted(), waiting.isAtRank(0))
	})

	start := time.Now()
	if err := stopWithin(app, 30*time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, c := range []*sseClient{admitted, waiting} {
		select {
		case <-c.ended:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: stream still open after the server stopped", c.user)
		}
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("stop took %v", took)
	}
}
