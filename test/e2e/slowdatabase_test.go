package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"go.uber.org/fx"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/domain/outbox"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// TestSlowDatabase_RaffleViewsAnswerWithinTheDatabaseTimeout: a raffle's view reads the raffle
// then counts its entries, a standing reads the raffle then the user's entry; on a warm
// connection each read is one round trip. On a database that answers every round trip in 0.8
// RUSHGATE_DB_TIMEOUT, each read fits its own timeout but the two do not fit one: the view
// answers within the timeout + 0.5 s of its arrival (503 UNAVAILABLE), not after both reads.
func TestSlowDatabase_RaffleViewsAnswerWithinTheDatabaseTimeout(t *testing.T) {
	for _, db := range testenv.Databases(t) {
		t.Run(string(db.Dialect), func(t *testing.T) {
			// One connection, on which the views below prepare their statements first.
			s, proxy, cfg := startBehindSlowProxy(t, db, func(*bootstrap.Config) {})
			created := s.do("POST", "/admin/raffles", s.adminToken(),
				fmt.Sprintf(`{"name":"slow","winners":1,"closesAt":%q}`, time.Now().Add(time.Hour).Format(time.RFC3339)))
			if created.status != http.StatusCreated {
				t.Fatalf("create raffle: %d %s", created.status, created.raw)
			}
			raffleID, user := created.str("id"), s.run+"entrant"
			if res := s.do("POST", "/raffles/"+raffleID+"/entries", s.token(user), ""); res.status != http.StatusCreated {
				t.Fatalf("enter: %d %s", res.status, res.raw)
			}
			views := map[string]string{"view": "/raffles/" + raffleID, "standing": "/raffles/" + raffleID + "/entries/me"}
			for name, path := range views {
				if res := s.do("GET", path, s.token(user), ""); res.status != http.StatusOK {
					t.Fatalf("%s with the database fast: %d %s", name, res.status, res.raw)
				}
			}

			proxy.SetDelay(cfg.Database.Timeout * 8 / 10)
			for name, path := range views {
				sent := time.Now()
				res := s.do("GET", path, s.token(user), "")
				took := time.Since(sent)
				t.Logf("%s with the database slow: %d after %v", name, res.status, took.Round(time.Millisecond))
				if res.status != http.StatusOK && res.status != http.StatusServiceUnavailable {
					t.Errorf("%s: %d %s, want 200 or 503", name, res.status, res.raw)
				}
				if bound := cfg.Database.Timeout + stallAllowance; took > bound {
					t.Errorf("%s answered %d after %v, want within %v", name, res.status, took.Round(time.Millisecond), bound)
				}
			}
		})
	}
}

// slowRoundTrips are the delays, as fractions of RUSHGATE_DB_TIMEOUT, that a slow database
// puts on every round trip in the tests of a request that reads before its lane's transaction:
// at 0.4 its two reads fit one timeout and its transaction finds the rest; at 0.8 the reads do
// not fit one.
var slowRoundTrips = []int{4, 8} // tenths

// answersWithinOneDatabaseTimeout checks that guarded, sent on a database whose every round trip
// costs tenths/10 of the timeout, answered 503 UNAVAILABLE within one timeout (+ 0.5 s) of its
// sending: its reads before the lane and its transaction share one timeout, rather than each
// taking its own.
func answersWithinOneDatabaseTimeout(t *testing.T, proxy *testkit.SlowProxy, cfg bootstrap.Config, tenths int, guarded func() response) {
	t.Helper()
	proxy.SetDelay(cfg.Database.Timeout * time.Duration(tenths) / 10)
	defer proxy.SetDelay(0)
	sent := time.Now()
	res := guarded()
	took := time.Since(sent)
	t.Logf("round trips of %d/10 the timeout: %d after %v", tenths, res.status, took.Round(time.Millisecond))
	assertError(t, res, http.StatusServiceUnavailable, "UNAVAILABLE")
	if bound := cfg.Database.Timeout + stallAllowance; took > bound {
		t.Errorf("answered %d after %v, want within %v", res.status, took.Round(time.Millisecond), bound)
	}
}

// TestSlowDatabase_AVerificationCostsOneDatabaseTimeout: before its lock and transaction, a
// verification reads its upload session, then its challenge, and checks the uploaded object;
// on a warm connection each read is one round trip. On a slow database it answers 503
// UNAVAILABLE within one RUSHGATE_DB_TIMEOUT (+ 0.5 s) of its arrival, whether its reads fit
// the timeout or not: not after its reads and then a transaction of its own timeout.
func TestSlowDatabase_AVerificationCostsOneDatabaseTimeout(t *testing.T) {
	for _, db := range testenv.Databases(t) {
		t.Run(string(db.Dialect), func(t *testing.T) {
			// One connection, on which a verification with the database fast prepares the statements.
			s, proxy, cfg := startBehindSlowProxy(t, db, func(*bootstrap.Config) {})
			challengeID := s.createChallenge(time.Now().Add(time.Hour))
			for _, tenths := range slowRoundTrips {
				warm, slow := s.run+fmt.Sprint("warm", tenths), s.run+fmt.Sprint("slow", tenths)
				first, second := s.uploadedSession(warm), s.uploadedSession(slow)
				if res := s.verify(warm, first.ID, challengeID, first.Key, warm); res.status != http.StatusCreated {
					t.Fatalf("verification with the database fast: %d %s", res.status, res.raw)
				}
				answersWithinOneDatabaseTimeout(t, proxy, cfg, tenths, func() response {
					return s.verify(slow, second.ID, challengeID, second.Key, slow)
				})
			}
		})
	}
}

// TestSlowDatabase_APaymentCostsOneDatabaseTimeout: before its lock and transaction, a payment
// reads its order (the row, then its items: two round trips on a warm connection) for its lock
// key. On a slow database it answers 503 UNAVAILABLE within one RUSHGATE_DB_TIMEOUT (+ 0.5 s)
// of its arrival, whether its read fits the timeout or not: not after its read and then a
// transaction of its own timeout.
func TestSlowDatabase_APaymentCostsOneDatabaseTimeout(t *testing.T) {
	for _, db := range testenv.Databases(t) {
		t.Run(string(db.Dialect), func(t *testing.T) {
			// One connection, on which a payment with the database fast prepares the statements.
			s, proxy, cfg := startBehindSlowProxy(t, db, func(*bootstrap.Config) {})
			product := s.createProduct("slowly paid", 100, 10)
			payer := s.run + "payer"
			s.createUser(payer, 1000)
			for _, tenths := range slowRoundTrips {
				warm, slow := s.placeOrder(payer, product, 1, ""), s.placeOrder(payer, product, 1, "")
				if res := s.pay(payer, warm, fmt.Sprint("warm", tenths)); res.status != http.StatusOK {
					t.Fatalf("payment with the database fast: %d %s", res.status, res.raw)
				}
				// The paid order's message is sent on the one connection too; the slow payment
				// must not queue behind that.
				s.outboxDelivered()
				answersWithinOneDatabaseTimeout(t, proxy, cfg, tenths, func() response {
					return s.pay(payer, slow, fmt.Sprint("slow", tenths))
				})
			}
		})
	}
}

// TestSlowDatabase_ContentionOnAPaymentsLockStillAnswers429: waiting for the lock spends none
// of a payment's database budget. A payment whose order read took more than half of
// RUSHGATE_DB_TIMEOUT (two round trips of 0.3 of it: 0.4 left room for no more than a busy
// machine's scheduling) and whose lock another holder keeps past the whole backoff schedule,
// seconds longer than the budget left, answers 429 TOO_MANY_REQUESTS, as contention does, not
// 503.
func TestSlowDatabase_ContentionOnAPaymentsLockStillAnswers429(t *testing.T) {
	for _, db := range testenv.Databases(t) {
		t.Run(string(db.Dialect), func(t *testing.T) {
			var coord ports.Coordination
			s, proxy, cfg := startBehindSlowProxyWith(t, db, fx.Populate(&coord), func(*bootstrap.Config) {})
			product := s.createProduct("contended", 100, 10)
			payer := s.run + "payer"
			s.createUser(payer, 1000)
			warm, contended := s.placeOrder(payer, product, 1, ""), s.placeOrder(payer, product, 1, "")
			if res := s.pay(payer, warm, "warm"); res.status != http.StatusOK {
				t.Fatalf("payment with the database fast: %d %s", res.status, res.raw)
			}
			s.outboxDelivered()
			// A payment's lock is its order's (smallest) product's. The lane answers the warm
			// payment before it releases that lock, so the lock may still be its own here.
			var held ports.Lock
			testkit.Eventually(t, 5*time.Second, "take the product's lock after the warm payment", func() error {
				var err error
				held, err = coord.Locker.TryAcquire(context.Background(), "stock:"+product, time.Minute)
				return err
			})
			defer func() { _ = held.Release(context.Background()) }()

			proxy.SetDelay(cfg.Database.Timeout * 3 / 10)
			defer proxy.SetDelay(0)
			sent := time.Now()
			res := s.pay(payer, contended, "contended")
			t.Logf("with the lock held: %d after %v", res.status, time.Since(sent).Round(time.Millisecond))
			assertError(t, res, http.StatusTooManyRequests, "TOO_MANY_REQUESTS")
		})
	}
}

// startBehindSlowProxy starts a server on production timeouts whose database is db behind a
// slow proxy (fast until told otherwise), on one connection and without raffle draws, with
// configure's changes; it returns the server, the proxy and the server's settings.
func startBehindSlowProxy(t *testing.T, db testenv.Database, configure func(*bootstrap.Config)) (*server, *testkit.SlowProxy, bootstrap.Config) {
	return startBehindSlowProxyWith(t, db, fx.Options(), configure)
}

// startBehindSlowProxyWith is startBehindSlowProxy with extra fx options, such as a port
// populated for the test.
func startBehindSlowProxyWith(t *testing.T, db testenv.Database, extra fx.Option, configure func(*bootstrap.Config)) (*server, *testkit.SlowProxy, bootstrap.Config) {
	proxy := testkit.StartSlowProxy(t, hostOf(t, db.URL))
	var cfg bootstrap.Config
	s := startServerWith(t, backend{name: string(db.Dialect), databaseURL: behind(t, proxy, db.URL)}, extra, productionTimeouts,
		func(c *bootstrap.Config) {
			c.Database.MaxOpenConns = 1
			// The raffle drawer reads the due raffles every second (by default), preparing its
			// statement on its first round: on the one slow connection, a round that comes
			// between a timed request's reads would take its place and its budget.
			c.Raffle.DrawInterval = time.Hour
			configure(c)
			cfg = *c
		})
	return s, proxy, cfg
}

// behind returns rawURL with its host:port replaced by the proxy's.
func behind(t *testing.T, p *testkit.SlowProxy, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.Addr()
	return u.String()
}

// hostOf returns the host:port of rawURL.
func hostOf(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		t.Fatalf("no host in %s: %v", rawURL, err)
	}
	return u.Host
}

// outboxDelivered returns once no outbox message is pending.
func (s *server) outboxDelivered() {
	s.t.Helper()
	testkit.Eventually(s.t, 10*time.Second, "the outbox delivered", func() error {
		if pending := s.outboxStatusCounts()[outbox.Pending]; pending > 0 {
			return fmt.Errorf("%d messages pending", pending)
		}
		return nil
	})
}

// TestSlowDatabase_OpeningALostRoomCostsOneDatabaseTimeout: a Redis restarted empty has lost
// every waiting room, and the first call of an event after it reads the event, then its free
// seats (one round trip each on a warm connection), to open the room again. On a slow database
// a seat reservation, a status poll and a claim answer within one RUSHGATE_DB_TIMEOUT (+ 0.5 s)
// of their arrival, whether the two reads fit the timeout or not: at 0.8 of it they do not, and
// the call answers 503 UNAVAILABLE, not after both reads; at 0.4 they do, and the call answers
// what the lost room leaves it (the user's token and place went with it), or 503.
func TestSlowDatabase_OpeningALostRoomCostsOneDatabaseTimeout(t *testing.T) {
	calls := map[string]struct {
		send     func(s *server, eventID, user, entryToken string) response
		roomLost int // the answer once the room is open again
	}{
		"reservation": {func(s *server, eventID, user, entryToken string) response {
			return s.reserve(eventID, "1", user, entryToken)
		}, http.StatusForbidden},
		"status": {func(s *server, eventID, user, _ string) response { return s.queueStatus(eventID, user) }, http.StatusNotFound},
		"claim":  {func(s *server, eventID, user, _ string) response { return s.claim(eventID, user) }, http.StatusNotFound},
	}
	for _, db := range testenv.Databases(t) {
		t.Run(string(db.Dialect), func(t *testing.T) {
			redis := testenv.StartPrivateRedis(t)
			// No reconciliation pass, which would read on the one connection.
			s, proxy, cfg := startBehindSlowProxy(t, db, func(c *bootstrap.Config) { c.Redis.URL, c.Queue.Tick = redis.URL, time.Hour })
			type lost struct{ eventID, user, entryToken, warm string }
			rooms := map[string]lost{}
			for _, tenths := range slowRoundTrips {
				for name := range calls {
					user := s.run + "admitted"
					eventID := s.createEvent(`{"name":"lost","seats":2,"mode":"pull"}`)
					// This instance knows the event now, as it does an event in use.
					entryToken := s.admit(eventID, user)
					rooms[fmt.Sprint(name, tenths)] = lost{eventID, user, entryToken, s.createEvent(`{"name":"warm","seats":2,"mode":"pull"}`)}
				}
			}

			redis.Restart()
			for _, tenths := range slowRoundTrips {
				for name, call := range calls {
					room := rooms[fmt.Sprint(name, tenths)]
					// Opening another room with the database fast prepares the two reads on the
					// one connection, a new one if a timeout closed the last.
					testkit.Eventually(t, 10*time.Second, "an entry with the database fast", func() error {
						if res := s.enter(room.warm, room.user); res.status != http.StatusCreated {
							return fmt.Errorf("enter: %d %s", res.status, res.raw)
						}
						return nil
					})
					proxy.SetDelay(cfg.Database.Timeout * time.Duration(tenths) / 10)
					sent := time.Now()
					res := call.send(s, room.eventID, room.user, room.entryToken)
					took := time.Since(sent)
					proxy.SetDelay(0)
					t.Logf("%s, round trips of %d/10 the timeout: %d after %v", name, tenths, res.status, took.Round(time.Millisecond))
					want := []int{http.StatusServiceUnavailable}
					if tenths < 8 { // the reads fit, unless the busy machine adds a round trip's worth
						want = append(want, call.roomLost)
					}
					if !slices.Contains(want, res.status) {
						t.Errorf("%s: %d %s, want one of %v", name, res.status, res.raw, want)
					}
					if bound := cfg.Database.Timeout + stallAllowance; took > bound {
						t.Errorf("%s answered %d after %v, want within %v", name, res.status, took.Round(time.Millisecond), bound)
					}
				}
			}
		})
	}
}
