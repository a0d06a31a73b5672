package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/rushgate/rushgate/bootstrap"
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
			s, proxy, cfg := startBehindSlowProxy(t, db, func(c *bootstrap.Config) { c.Raffle.DrawInterval = time.Hour })
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

// TestSlowDatabase_AVerificationsPrecheckCostsOneDatabaseTimeout: before its lock and
// transaction, a verification reads its upload session, then its challenge, and checks the
// uploaded object; on a warm connection each read is one round trip. On a database that answers
// every round trip in 0.8 RUSHGATE_DB_TIMEOUT, each read fits its own timeout but the two do not
// fit one: the verification answers 503 UNAVAILABLE within the timeout + 0.5 s of its arrival,
// not after both reads and a transaction that could not finish either.
func TestSlowDatabase_AVerificationsPrecheckCostsOneDatabaseTimeout(t *testing.T) {
	for _, db := range testenv.Databases(t) {
		t.Run(string(db.Dialect), func(t *testing.T) {
			// One connection, on which the first verification prepares the statements.
			s, proxy, cfg := startBehindSlowProxy(t, db, func(*bootstrap.Config) {})
			challengeID := s.createChallenge(time.Now().Add(time.Hour))
			first, second := s.uploadedSession(s.run+"first"), s.uploadedSession(s.run+"second")
			if res := s.verify(s.run+"first", first.ID, challengeID, first.Key, "first"); res.status != http.StatusCreated {
				t.Fatalf("verification with the database fast: %d %s", res.status, res.raw)
			}

			proxy.SetDelay(cfg.Database.Timeout * 8 / 10)
			sent := time.Now()
			res := s.verify(s.run+"second", second.ID, challengeID, second.Key, "second")
			took := time.Since(sent)
			t.Logf("verification with the database slow: %d after %v", res.status, took.Round(time.Millisecond))
			if res.status != http.StatusCreated && res.status != http.StatusServiceUnavailable {
				t.Errorf("%d %s, want 201 or 503", res.status, res.raw)
			}
			if bound := cfg.Database.Timeout + stallAllowance; took > bound {
				t.Errorf("answered %d after %v, want within %v", res.status, took.Round(time.Millisecond), bound)
			}
		})
	}
}

// startBehindSlowProxy starts a server on production timeouts whose database is db behind a
// slow proxy (fast until told otherwise), on one connection, with configure's changes; it
// returns the server, the proxy and the server's settings.
func startBehindSlowProxy(t *testing.T, db testenv.Database, configure func(*bootstrap.Config)) (*server, *testkit.SlowProxy, bootstrap.Config) {
	proxy := testkit.StartSlowProxy(t, hostOf(t, db.URL))
	var cfg bootstrap.Config
	s := startServer(t, backend{name: string(db.Dialect), databaseURL: behind(t, proxy, db.URL)}, productionTimeouts,
		func(c *bootstrap.Config) {
			c.Database.MaxOpenConns = 1
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
