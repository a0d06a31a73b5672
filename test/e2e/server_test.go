// Package e2e drives the fx-built server over real HTTP, on the embedded default and on
// Postgres+Redis and MySQL+Redis, and checks what reached the database.
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
)

const jwtSecret = "e2e-secret-e2e-secret-e2e-secret-!!"

// backend is one way to run the server: fixed URLs, or services provisioned when a server
// starts, so the memory run never waits on (or skips for) a database that is down.
type backend struct {
	name        string
	databaseURL string // empty: memory
	redisURL    string // empty: memory
	// provision, when set, returns the URLs for one server; it skips or fails the test when a
	// service is unreachable.
	provision func(t *testing.T) (databaseURL, redisURL string)
}

// testBackends is the one list of backends every end-to-end test runs on.
var testBackends = []backend{
	{name: "memory"},
	{name: "postgres+redis", provision: func(t *testing.T) (string, string) {
		return testenv.Postgres(t).URL, redisURL(t)
	}},
	{name: "mysql+redis", provision: func(t *testing.T) (string, string) {
		return testenv.MySQL(t).URL, redisURL(t)
	}},
}

// backends returns the embedded default and every real database with Redis.
func backends(*testing.T) []backend { return testBackends }

func redisURL(t *testing.T) string { return "redis://" + testenv.RedisAddr(t) + "/0" }

// server is a running rushgate and a client for it.
type server struct {
	t      *testing.T
	url    string
	tokens *rghttp.Tokens
	db     *sql.DB // nil on memory
	// dialect tells how to write placeholders for db.
	dialect gormdb.Dialect
	http    *http.Client
	// run makes idempotency keys unique to this server (newRunID).
	run string
	// stores is the server's own storage, memory included, for checks through the ports.
	stores serverStores
}

// serverStores are the store sets of the server's flows that tests check through the ports.
type serverStores struct {
	ports.CommerceStores
	ports.WaitingStores
}

// shareStorage provisions b's own database and Redis now, so that every instance started from
// b afterwards shares them (startServer provisions afresh for each instance otherwise).
func (b *backend) shareStorage(t *testing.T) {
	if b.provision != nil {
		b.databaseURL, b.redisURL = b.provision(t)
		b.provision = nil
	}
}

// startServer is the one builder of the server under test: the fx-built application on b with
// the defaults of every setting, changed by tweak.
func startServer(t *testing.T, b backend, tweak ...func(*bootstrap.Config)) *server {
	t.Helper()
	return startServerWith(t, b, fx.Options(), tweak...)
}

// startServerWith is startServer with extra fx options, such as a port decorated for the test.
func startServerWith(t *testing.T, b backend, extra fx.Option, tweak ...func(*bootstrap.Config)) *server {
	t.Helper()
	if b.provision != nil {
		b.databaseURL, b.redisURL = b.provision(t)
	}
	cfg := testConfig(b)
	cfg.Storage.DataDir = t.TempDir()
	for _, f := range tweak {
		f(&cfg)
	}
	var (
		srv    *bootstrap.Server
		stores serverStores
	)
	app := fxtest.New(t, modules(t, cfg), extra, fx.Populate(&srv, &stores.CommerceStores, &stores.WaitingStores))
	app.RequireStart()
	t.Cleanup(app.RequireStop)

	s := &server{
		t:      t,
		url:    srv.URL(),
		tokens: rghttp.NewTokens([]byte(jwtSecret)),
		http:   newClient(cfg.Server.ReadHeaderTimeout),
		run:    newRunID(),
		stores: stores,
	}
	if b.databaseURL != "" {
		db, err := gormdb.Open(context.Background(), b.databaseURL, testenv.DBOptions())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		s.db, s.dialect = db.SQL(), db.Dialect()
	}
	return s
}

// newRunID returns a random prefix for a server's idempotency keys: the servers of parallel
// tests, and of other runs of the suite, share one Redis, where the keys' records live.
func newRunID() string { return rand.Text() + "-" }

// newClient returns the tests' client of a server whose RUSHGATE_READ_HEADER_TIMEOUT is
// readHeaderTimeout. The server closes a connection on which no request starts within that
// timeout, and Go's transport keeps the spare connections it dialed during a burst idle in its
// pool: one picked up as the server closes it fails with EOF, not retried since it never
// carried a request. Closing idle connections at half the header timeout leaves that to the
// client.
func newClient(readHeaderTimeout time.Duration) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: 600, IdleConnTimeout: readHeaderTimeout / 2}}
}

// modules is the application under test on cfg, as bootstrap builds it, but for two things:
// its logs go to t.Log (shown when the test fails), and on Redis its waiting rooms live under
// the test's own key prefix (keyPrefix), shared by the servers of one test.
func modules(t *testing.T, cfg bootstrap.Config) fx.Option {
	logs := testenv.LogWriter(t)
	cfg.Redis.KeyPrefix = keyPrefix(t)
	return fx.Options(bootstrap.Modules(cfg), fx.Decorate(func(*slog.Logger) *slog.Logger {
		var level slog.Level
		_ = level.UnmarshalText([]byte(cfg.Server.LogLevel))
		return slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: level}))
	}))
}

// keyPrefix returns the waiting-room key prefix (RUSHGATE_REDIS_KEY_PREFIX) of t, the same on
// every call during t, so that the servers and processes of one test share their rooms. The
// rooms' index and the brokers' set are whole-prefix keys every server's workers scan, so with
// the default prefix a server of another test, or of another run on the same Redis, would
// reconcile this test's rooms with its own settings (an idle timeout of 1.5 s drops users that
// poll every 2 s).
func keyPrefix(t *testing.T) string {
	prefix, loaded := keyPrefixes.LoadOrStore(t, testenv.KeyPrefix())
	if !loaded {
		t.Cleanup(func() { keyPrefixes.Delete(t) })
	}
	return prefix.(string)
}

// keyPrefixes holds each running test's key prefix.
var keyPrefixes sync.Map // *testing.T → string

// stopWithin stops an app the test built itself, giving its stop hooks limit to finish, so a
// stop that hangs fails the test instead of stalling the run.
func stopWithin(app interface{ Stop(context.Context) error }, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	return app.Stop(ctx)
}

// testConfig is the production defaults with the test's backend, a fixed secret, an ephemeral
// port, quiet logs, and testenv's generous dependency timeouts and lock budget, so that only a
// test about faults (productionTimeouts) sees a 503 or a 429.
func testConfig(b backend) bootstrap.Config {
	cfg := bootstrap.DefaultConfig()
	cfg.Server.Addr = "127.0.0.1:0"
	cfg.Server.LogLevel = "error"
	cfg.Database.URL, cfg.Redis.URL = b.databaseURL, b.redisURL
	cfg.Database.Timeout, cfg.Redis.Timeout = testenv.DependencyTimeout, testenv.DependencyTimeout
	cfg.Storage.S3Timeout, cfg.Outbox.DataPlatformTimeout = testenv.DependencyTimeout, testenv.DependencyTimeout
	cfg.Commerce.TopProductsTimeout = testenv.DependencyTimeout
	cfg.Guard.LockTTL, cfg.Guard.LockRetries = testenv.LockTTL, testenv.LockRetries
	cfg.Auth.JWTSecret = jwtSecret
	return cfg
}

// productionTimeouts puts back the production defaults of the dependency timeouts and the lock
// budget, for a test about what users get when a dependency fails: its time bounds are
// measured against these.
func productionTimeouts(c *bootstrap.Config) {
	d := bootstrap.DefaultConfig()
	c.Database.Timeout, c.Redis.Timeout, c.Storage.S3Timeout = d.Database.Timeout, d.Redis.Timeout, d.Storage.S3Timeout
	c.Guard.LockTTL, c.Guard.LockRetries = d.Guard.LockTTL, d.Guard.LockRetries
}

func (s *server) token(user string) string {
	raw, err := s.tokens.Mint(user, rghttp.RoleUser, time.Hour)
	if err != nil {
		s.t.Fatal(err)
	}
	return raw
}

func (s *server) adminToken() string {
	raw, err := s.tokens.Mint("admin", rghttp.RoleAdmin, time.Hour)
	if err != nil {
		s.t.Fatal(err)
	}
	return raw
}

// response is a decoded answer.
type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

func (r response) str(field string) string { s, _ := r.body[field].(string); return s }
func (r response) num(field string) int    { n, _ := r.body[field].(float64); return int(n) }

// hasNums is nil when every field of want holds its number, and otherwise names the body, for
// testkit.Eventually to report what it last saw.
func (r response) hasNums(want map[string]int) error {
	for field, n := range want {
		if r.num(field) != n {
			return fmt.Errorf("%s is %d, want %d, in %s", field, r.num(field), n, r.raw)
		}
	}
	return nil
}

// hasStatus is nil when the answer's "status" field is want: a check for testkit.Eventually.
func (r response) hasStatus(want string) error {
	if got := r.str("status"); got != want {
		return fmt.Errorf("status %q, want %q, in %d %s", got, want, r.status, r.raw)
	}
	return nil
}

// do sends one request; headers are name, value pairs.
func (s *server) do(method, path, token, body string, headers ...string) response {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := s.http.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	checkAgainstOpenAPI(s.t, req, res, raw)
	out := response{status: res.StatusCode, header: res.Header, raw: raw}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			s.t.Fatalf("%s %s: answer is not a JSON object: %q", method, path, raw)
		}
	}
	return out
}

func (s *server) createCrew(max int) string {
	s.t.Helper()
	res := s.do("POST", "/crews", s.adminToken(), fmt.Sprintf(`{"name":"e2e crew","maxMembers":%d}`, max))
	if res.status != http.StatusCreated || res.str("id") == "" {
		s.t.Fatalf("create crew: %d %s", res.status, res.raw)
	}
	return res.str("id")
}

func (s *server) join(crewID, user, key string) response {
	return s.do("POST", "/crews/"+crewID+"/join", s.token(user), "", "Idempotency-Key", s.run+key)
}

// stored reads a crew's counter and its member rows straight from the database (or, on memory,
// through the API).
type stored struct {
	currentMembers, maxMembers, members, distinctUsers int
}

func (s *server) stored(crewID string) stored {
	s.t.Helper()
	if s.db == nil {
		res := s.do("GET", "/crews/"+crewID, s.token("reader"), "")
		page := s.do("GET", "/crews/"+crewID+"/members?limit=500", s.token("reader"), "")
		items, _ := page.body["items"].([]any)
		users := map[string]bool{}
		for _, it := range items {
			users[it.(map[string]any)["userId"].(string)] = true
		}
		return stored{currentMembers: res.num("currentMembers"), maxMembers: res.num("maxMembers"), members: len(items), distinctUsers: len(users)}
	}
	var st stored
	q := s.query("SELECT current_members, max_members FROM crews WHERE id = ?")
	if err := s.db.QueryRow(q, crewID).Scan(&st.currentMembers, &st.maxMembers); err != nil {
		s.t.Fatal(err)
	}
	q = s.query("SELECT COUNT(*), COUNT(DISTINCT user_id) FROM crew_members WHERE crew_id = ?")
	if err := s.db.QueryRow(q, crewID).Scan(&st.members, &st.distinctUsers); err != nil {
		s.t.Fatal(err)
	}
	return st
}

// query rewrites ? placeholders for the server's database.
func (s *server) query(q string) string { return gormdb.Bind(s.dialect, q) }

func assertError(t *testing.T, res response, status int, code string) {
	t.Helper()
	if res.status != status || res.str("error") != code || res.str("message") == "" {
		t.Fatalf("want %d %s, got %d %s", status, code, res.status, res.raw)
	}
}

// shiftedClock is a server's clock: the wall clock moved forward by what the test adds, so the
// server lives through minutes in an instant (a coupon expires, a rate window passes). Tokens
// are still checked against the wall clock.
type shiftedClock struct {
	offset atomic.Int64
}

func (c *shiftedClock) Now() time.Time {
	return system.Clock{}.Now().Add(time.Duration(c.offset.Load()))
}

// advance moves the clock forward by d.
func (c *shiftedClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// advanceTo moves the clock to at, unless it shows a later time already.
func (c *shiftedClock) advanceTo(at time.Time) {
	if d := at.Sub(c.Now()); d > 0 {
		c.offset.Add(int64(d))
	}
}

// startServerOnClock starts a server on b whose clock is clock.
func startServerOnClock(t *testing.T, b backend, clock *shiftedClock, tweak ...func(*bootstrap.Config)) *server {
	t.Helper()
	return startServerWith(t, b, fx.Decorate(func(ports.Clock) ports.Clock { return clock }), tweak...)
}
