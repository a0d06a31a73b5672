package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// stallAllowance is the margin over a dependency's configured timeout: a request that
// needs a stalled dependency answers within the timeout plus this, counted from the later of its
// arrival and the start of the stall.
const stallAllowance = 500 * time.Millisecond

// stallBound bounds an answer that needed a stalled dependency: the dependency's timeout +
// stallAllowance, plus the measurement slack — what the server itself took to answer healthy
// requests of the same kind on this machine (CPU, scheduling, under -race on a loaded runner),
// which is no wait on the dependency. The slack is capped at stallAllowance, so the bound stays
// well short of a second timeout.
func stallBound(timeout, healthy time.Duration) time.Duration {
	return (timeout + stallAllowance + min(healthy, stallAllowance)).Round(time.Millisecond)
}

// herdSize is how many concurrent requests of one flow share its lock key in a herd.
const herdSize = 30

// TestDatabaseFrozen_EveryRequestAnswersWithinTheDatabaseTimeout freezes a private Postgres and
// a private MariaDB (SIGSTOP: connections stay open, nothing answers) under herds on one lock
// key of each guarded flow, then sends single requests and herds while it stays frozen: every
// answer comes within RUSHGATE_DB_TIMEOUT + 0.5 s of the later of its sending and the freeze,
// and every refusal is 503 UNAVAILABLE with Retry-After.
func TestDatabaseFrozen_EveryRequestAnswersWithinTheDatabaseTimeout(t *testing.T) {
	for _, newDatabase := range []func(*testing.T) privateDatabase{startPrivatePostgres, startPrivateMariaDB} {
		db := newDatabase(t)
		t.Run(db.name, func(t *testing.T) {
			var cfg bootstrap.Config
			// The database's production timeout is under test. Redis is private too: on the
			// shared one, other jobs' load (and their runs' locks on the same keys) would add
			// waits that are not the database's. The lock keeps testenv's roomy budget.
			s := startServer(t, backend{name: db.name, databaseURL: db.url, redisURL: testenv.StartPrivateRedis(t).URL},
				productionTimeouts, func(c *bootstrap.Config) {
					c.Guard.LockTTL, c.Guard.LockRetries = testenv.LockTTL, testenv.LockRetries
					cfg = *c
				})
			flows, consistent := guardedFlows(s)
			cart, cartConsistent := cartAddFlow(s)
			entry, entriesConsistent := raffleEntryFlow(s)
			seat, seatsConsistent := seatReservationFlow(s)
			answersWithinTheStallBound(t, s, "the database", cfg.Database.Timeout, db.signal, append(flows, cart, entry, seat), func() {
				consistent()
				cartConsistent()
				entriesConsistent()
				seatsConsistent()
			})
		})
	}
}

// TestRedisFrozen_EveryRequestAnswersWithinTheRedisTimeout is the same with a private Redis
// frozen: within RUSHGATE_REDIS_TIMEOUT + 0.5 s, however many requests queue on the key.
func TestRedisFrozen_EveryRequestAnswersWithinTheRedisTimeout(t *testing.T) {
	redis := testenv.StartPrivateRedis(t)
	var cfg bootstrap.Config
	s := startServer(t, backend{name: "memory+redis", redisURL: redis.URL}, productionTimeouts, func(c *bootstrap.Config) { cfg = *c })
	flows, consistent := guardedFlows(s)
	seat, seatsConsistent := seatReservationFlow(s)
	answersWithinTheStallBound(t, s, "Redis", cfg.Redis.Timeout, func(sig syscall.Signal) error { return redis.Process.Signal(sig) },
		append(flows, seat), func() {
			consistent()
			seatsConsistent()
		})
}

// guardedFlow sends requests of one guarded flow, all on one lock key, each as a new request
// (its own user or idempotency key).
type guardedFlow struct {
	name string
	send func() answer
}

// guardedFlows creates a crew, a wallet and a coupon with room for every request the test
// sends (healthy herds sent again included), and returns the three flows that queue on their
// keys, and a check that what they stored is consistent: each invariant holds, and each flow
// stored at least its successes and at most what it sent, every request being a new user or
// idempotency key (a 503 does not say whether its write committed, so counts are not known).
func guardedFlows(s *server) ([]guardedFlow, func()) {
	crewID := s.createCrew(100 * herdSize)
	// The payer is this server's own, as the crew and the coupon are: its lock key
	// (balance:{userId}) is shared by every server on a Redis, and another run's charges holding
	// it across that run's own freeze would make these wait for it before their own timeout.
	payer := s.run + "payer"
	s.createUser(payer, 0)
	return guardedFlowsOn(s, crewID, payer, s.createCoupon(100*herdSize))
}

// guardedFlowsOn is guardedFlows on a crew, a payer of balance 0 and a coupon the caller made.
func guardedFlowsOn(s *server, crewID, payer, couponID string) ([]guardedFlow, func()) {
	var sent atomic.Int64
	next := func() int64 { return sent.Add(1) }
	var joins, charges, issues sentAndServed
	consistent := func() {
		s.t.Helper()
		st := s.stored(crewID)
		if st.currentMembers != st.members || st.members != st.distinctUsers {
			s.t.Errorf("crew inconsistent: %+v", st)
		}
		joins.check(s.t, "crew members", int64(st.members))
		// Charges of 1 from a balance of 0: one ledger entry per point, after the opening one.
		w := s.wallet(payer)
		if w.balance != w.ledgerSum || int64(w.entries) != w.balance+1 {
			s.t.Errorf("wallet inconsistent: %+v", w)
		}
		charges.check(s.t, "balance charged", w.balance)
		ctx := context.Background()
		c, err := s.stores.Coupons.Get(ctx, couponID)
		if err != nil {
			s.t.Fatal(err)
		}
		if n, err := s.stores.UserCoupons.Count(ctx, couponID); err != nil || n != c.IssuedQuantity() {
			s.t.Errorf("coupon issued %d, user coupons %d (%v)", c.IssuedQuantity(), n, err)
		}
		issues.check(s.t, "coupons issued", int64(c.IssuedQuantity()))
	}
	return []guardedFlow{
		{"crew join", joins.counted(func() answer {
			n := next()
			return s.joinFromAnyGoroutine(crewID, fmt.Sprint("joiner-", n), fmt.Sprint("join-", n))
		})},
		{"balance charge", charges.counted(func() answer {
			return s.postFromAnyGoroutine("/api/users/"+payer+"/balance/charge", payer, `{"amount":1}`, fmt.Sprint("charge-", next()))
		})},
		{"coupon issue", issues.counted(func() answer {
			return s.postFromAnyGoroutine("/api/coupons/"+couponID+"/issue", fmt.Sprint("holder-", next()), "", "")
		})},
	}, consistent
}

// sentAndServed counts a flow's requests and its successes, each of which stores one thing.
type sentAndServed struct{ sent, served atomic.Int64 }

// counted is send, counted.
func (c *sentAndServed) counted(send func() answer) func() answer {
	return func() answer {
		c.sent.Add(1)
		a := send()
		if a.err == nil && a.status < 300 {
			c.served.Add(1)
		}
		return a
	}
}

// check fails t unless stored things are at least the successes and at most the requests sent:
// fewer lost a success, more stored a request twice.
func (c *sentAndServed) check(t *testing.T, what string, stored int64) {
	t.Helper()
	if stored < c.served.Load() || stored > c.sent.Load() {
		t.Errorf("%s: %d stored, %d requests answered with success of %d sent", what, stored, c.served.Load(), c.sent.Load())
	}
}

// cartAddFlow adds one unit of one product to one user's cart per request: adds to one cart
// queue in process and are served in batches, one transaction each, with no Redis lock. Its
// check: the cart holds one line, with at least the units of every add answered 201 and at
// most those of every add sent (a 503 does not say whether its batch committed).
func cartAddFlow(s *server) (guardedFlow, func()) {
	buyer := s.run + "buyer"
	productID := s.createProduct("herded", 100, 100*herdSize)
	body := fmt.Sprintf(`{"productId":%q,"quantity":1}`, productID)
	var sent, added atomic.Int64
	consistent := func() {
		s.t.Helper()
		lines, err := s.stores.Carts.Lines(context.Background(), buyer)
		if err != nil {
			s.t.Fatal(err)
		}
		if len(lines) != 1 || int64(lines[0].Quantity()) < added.Load() || int64(lines[0].Quantity()) > sent.Load() {
			s.t.Errorf("cart inconsistent: %d lines %+v, %d adds answered 201 of %d sent", len(lines), lines, added.Load(), sent.Load())
		}
	}
	return guardedFlow{"cart add", func() answer {
		sent.Add(1)
		a := s.postFromAnyGoroutine("/api/cart/items", buyer, body, "")
		if a.err == nil && a.status == http.StatusCreated {
			added.Add(1)
		}
		return a
	}}, consistent
}

// seatReservationFlow reserves a seat of one pull event per request, each a seat of its own by
// an admitted user of its own: a seat lock (5 s lease, 3 s wait) per request, taken before the
// database's transaction. Its check: no seat is booked twice, and the reservations are at least
// those answered 201 and at most those sent (a 503 does not say whether its write committed).
func seatReservationFlow(s *server) (guardedFlow, func()) {
	// Enough for the healthy herd sent a few times, the herds caught by and during the stall,
	// and the requests after it.
	const seats = 8 * herdSize
	eventID := s.createEvent(fmt.Sprintf(`{"name":"frozen seats","seats":%d,"slots":%d,"mode":"pull"}`, seats, seats))
	tokens := make([]string, seats)
	for i := range tokens {
		tokens[i] = s.admit(eventID, fmt.Sprint(s.run, "seated-", i))
	}
	var sent, reserved atomic.Int64
	consistent := func() {
		s.t.Helper()
		st := s.seatState(eventID, seats)
		if st.reservations != st.reservedSeats || st.reservations != st.distinctSeats ||
			int64(st.reservations) < reserved.Load() || int64(st.reservations) > min(sent.Load(), seats) {
			s.t.Errorf("seats inconsistent: %+v, %d reservations answered 201 of %d sent", st, reserved.Load(), sent.Load())
		}
	}
	return guardedFlow{"seat reservation", func() answer {
		n := sent.Add(1)
		if n > seats {
			return answer{err: fmt.Errorf("the flow's %d seats are all used", seats)}
		}
		a := s.postFromAnyGoroutine(fmt.Sprintf("/events/%s/seats/%d/reservations", eventID, n), fmt.Sprint(s.run, "seated-", n-1),
			"", "", "Entry-Token", tokens[n-1])
		if a.err == nil && a.status == http.StatusCreated {
			reserved.Add(1)
		}
		return a
	}}, consistent
}

// raffleEntryFlowName names raffleEntryFlow.
const raffleEntryFlowName = "raffle entry"

// raffleEntryFlow enters a new user in one raffle per request: entries of one raffle queue in
// process and are stored in batches, one statement each, with no Redis lock. Its check: the
// raffle counts at least every entry answered 201 and at most every entry sent (a 503 does not
// say whether its batch committed).
func raffleEntryFlow(s *server) (guardedFlow, func()) {
	admin := s.adminToken()
	created := s.do("POST", "/admin/raffles", admin,
		fmt.Sprintf(`{"name":"frozen","winners":1,"closesAt":%q}`, time.Now().Add(time.Hour).Format(time.RFC3339Nano)))
	if created.status != http.StatusCreated {
		s.t.Fatalf("create raffle: %d %s", created.status, created.raw)
	}
	raffleID := created.str("id")
	var (
		sent, entered atomic.Int64
		mu            sync.Mutex
		acknowledged  []string // the users whose entry was answered 201
	)
	consistent := func() {
		s.t.Helper()
		counted := s.do("GET", "/raffles/"+raffleID, admin, "").num("entries")
		if int64(counted) < entered.Load() || int64(counted) > sent.Load() {
			s.t.Errorf("raffle inconsistent: %d entries counted, %d answered 201 of %d sent", counted, entered.Load(), sent.Load())
		}
		for _, user := range acknowledged {
			if standing := s.do("GET", "/raffles/"+raffleID+"/entries/me", s.token(user), ""); standing.str("status") != "entered" {
				s.t.Errorf("%s heard 201 but is not entered: %d %s", user, standing.status, standing.raw)
			}
		}
	}
	return guardedFlow{raffleEntryFlowName, func() answer {
		user := fmt.Sprint(s.run, "entrant-", sent.Add(1))
		a := s.postFromAnyGoroutine("/raffles/"+raffleID+"/entries", user, "", "")
		if a.err == nil && a.status == http.StatusCreated {
			entered.Add(1)
			mu.Lock()
			acknowledged = append(acknowledged, user)
			mu.Unlock()
		}
		return a
	}}, consistent
}

// answersWithinTheStallBound runs the flows against a dependency that signal freezes:
//
//  1. caught by the freeze: a herd of each flow is sent and the dependency frozen as soon as
//     the first answer arrives, so the rest are queued, batched or mid-step when it stops;
//  2. arriving during the stall: one request of each flow, one after another;
//  3. a herd of each flow arriving during the stall.
//
// Every answer must be a success or 503 UNAVAILABLE with Retry-After, within timeout +
// stallAllowance (+ the measured slack) of the later of its sending and the freeze; from 2 on,
// only 503. Once the dependency resumes, the flows succeed again and what they stored is
// consistent.
func answersWithinTheStallBound(t *testing.T, s *server, dependency string, timeout time.Duration, signal func(syscall.Signal) error,
	flows []guardedFlow, consistent func()) {
	// A healthy herd first: it proves the flows work, warms the connections (client, pools) a
	// herd needs, and measures what the server itself takes to answer a herd on this machine.
	// It is a precondition, not the stall under test: on a runner busy enough that a herd
	// outlasts a production timeout, it is sent again (each flow has room for several).
	herdLatency := healthyHerdLatency(t, flows, "the freeze")
	bound := stallBound(timeout, herdLatency)
	t.Logf("healthy herd: the slowest of %d answered in %v; bound %v", len(flows)*herdSize, herdLatency.Round(time.Millisecond), bound)
	var frozen time.Time
	check := func(phase string, answers map[string][]answer, refusedOnly bool) {
		t.Helper()
		for _, f := range flows {
			slowest, refused := time.Duration(0), 0
			for _, a := range answers[f.name] {
				took := a.at.Sub(later(a.sent, frozen))
				slowest = max(slowest, took)
				unavailable := a.err == nil && a.status == http.StatusServiceUnavailable && a.code == "UNAVAILABLE" && a.retryAfter != ""
				if unavailable {
					refused++
				}
				if !unavailable && (refusedOnly || a.err != nil || a.status >= 300) {
					want := "503 UNAVAILABLE with Retry-After or a success"
					if refusedOnly {
						want = "503 UNAVAILABLE with Retry-After"
					}
					t.Errorf("%s, %s: want %s, got %v", phase, f.name, want, a)
				}
				if took > bound {
					t.Errorf("%s, %s: answered %v after %s froze (or the request was sent), want within %v: %v",
						phase, f.name, took.Round(time.Millisecond), dependency, bound, a)
				}
			}
			t.Logf("%s, %s: %d answers, %d refused 503, the slowest %v after the later of sending and the freeze (bound %v)",
				phase, f.name, len(answers[f.name]), refused, slowest.Round(time.Millisecond), bound)
		}
	}

	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := signal(syscall.SIGCONT); err != nil {
				t.Errorf("resume %s: %v", dependency, err)
			}
		}
	}
	// Registered before the freeze, so it runs however the test ends, a freeze that failed
	// halfway included: no frozen server outlives the test.
	t.Cleanup(resume)

	firstAnswer := make(chan struct{})
	var firstOnce sync.Once
	caught := herd(flows, func() { firstOnce.Do(func() { close(firstAnswer) }) })
	<-firstAnswer
	frozen = time.Now()
	if err := signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("freeze %s: %v", dependency, err)
	}
	check("caught by the freeze", caught(), false)

	single := map[string][]answer{}
	for _, f := range flows {
		single[f.name] = []answer{f.send()}
	}
	check("single request during the stall", single, true)
	check("herd during the stall", herd(flows, func() {})(), true)

	resume()
	for _, f := range flows {
		testkit.Eventually(t, 30*time.Second, f.name+" succeeds once "+dependency+" resumed", func() error {
			if a := f.send(); a.err != nil || a.status >= 300 {
				return fmt.Errorf("answered %v", a)
			}
			return nil
		})
	}
	consistent()
}

// herd sends herdSize requests of every flow at once, calling answered after each answer, and
// returns a function that waits for all of them and returns them by flow.
func herd(flows []guardedFlow, answered func()) func() map[string][]answer {
	answers := make(map[string][]answer, len(flows))
	var wg sync.WaitGroup
	for _, f := range flows {
		got := make([]answer, herdSize)
		answers[f.name] = got
		for i := range got {
			wg.Go(func() {
				got[i] = f.send()
				answered()
			})
		}
	}
	return func() map[string][]answer {
		wg.Wait()
		return answers
	}
}

// healthyHerdLatency sends a herd of every flow until each answers only successes, and returns
// the slowest answer's time: what the server itself takes to answer a herd on this machine, the
// slack a stall's bound adds. event names what the herd comes before, for the failure message.
func healthyHerdLatency(t *testing.T, flows []guardedFlow, event string) time.Duration {
	t.Helper()
	var latency time.Duration
	testkit.Eventually(t, 30*time.Second, "a healthy herd of every flow answered with successes", func() error {
		healthy := herd(flows, func() {})()
		latency = 0
		for _, f := range flows {
			for _, a := range healthy[f.name] {
				if a.err != nil || a.status >= 300 {
					return fmt.Errorf("%s before %s: %v", f.name, event, a)
				}
				latency = max(latency, a.at.Sub(a.sent))
			}
		}
		return nil
	})
	return latency
}
