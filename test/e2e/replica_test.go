package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
)

// replicaFallbacks is the metric counting reads a replica should have served but the primary did.
const replicaFallbacks = "rushgate_db_replica_fallbacks_total"

// replicatedPostgres is a private Postgres primary and its streaming replica, started by
// scripts/pg-replica.sh; both count their statements in pg_stat_statements.
type replicatedPostgres struct {
	dir                    string
	primaryURL, replicaURL string
	primary, replica       *sql.DB
}

func startReplicatedPostgres(t *testing.T) replicatedPostgres {
	t.Helper()
	if bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_basebackup"); len(bins) == 0 {
		testenv.Unreachable(t, "postgres server binaries", fmt.Errorf("no /usr/lib/postgresql/*/bin/pg_basebackup"))
	}
	ports, err := testenv.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	pair := replicatedPostgres{dir: filepath.Join(privateDir(t, "rushgate-pgreplica-", "postgres"), "pair")}
	script := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("../../scripts/pg-replica.sh", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("scripts/pg-replica.sh %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	t.Cleanup(func() { _ = exec.Command("../../scripts/pg-replica.sh", "stop", pair.dir).Run() })
	for line := range strings.Lines(script("start", pair.dir, strconv.Itoa(ports[0]), strconv.Itoa(ports[1]))) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "PG_PRIMARY_URL="); ok {
			pair.primaryURL = v
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "PG_REPLICA_URL="); ok {
			pair.replicaURL = v
		}
	}
	for _, db := range []struct {
		url string
		to  **sql.DB
	}{{pair.primaryURL, &pair.primary}, {pair.replicaURL, &pair.replica}} {
		conn, err := sql.Open("pgx", db.url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		*db.to = conn
	}
	return pair
}

// exec runs a statement on db, failing the test on an error.
func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.DependencyTimeout)
	defer cancel()
	if _, err := db.ExecContext(ctx, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// caughtUp waits until the replica has replayed everything the primary had written when called.
func (p replicatedPostgres) caughtUp(t *testing.T) {
	t.Helper()
	var target string
	if err := p.primary.QueryRow("SELECT pg_current_wal_lsn()::text").Scan(&target); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testenv.DependencyTimeout)
	for {
		var done bool
		err := p.replica.QueryRow("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", target).Scan(&done)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica has not replayed up to %s within %v", target, testenv.DependencyTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// replicaStatements returns the statements the replica ran since the last reset, with their
// calls, leaving out the test's own (they all name a pg_ function or view).
func (p replicatedPostgres) replicaStatements(t *testing.T) map[string]int64 {
	t.Helper()
	rows, err := p.replica.Query("SELECT query, calls FROM pg_stat_statements WHERE query NOT LIKE '%pg\\_%'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	statements := map[string]int64{}
	for rows.Next() {
		var (
			query string
			calls int64
		)
		if err := rows.Scan(&query, &calls); err != nil {
			t.Fatal(err)
		}
		statements[query] += calls
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return statements
}

// ranOn reports whether some statement holding fragment was run.
func ranOn(statements map[string]int64, fragment string) bool {
	for query := range statements {
		if strings.Contains(query, fragment) {
			return true
		}
	}
	return false
}

// startReplicatedServer starts a server on the pair's primary with the replica configured, and
// Redis; top products are read anew on every request.
func startReplicatedServer(t *testing.T, pair replicatedPostgres) *server {
	t.Helper()
	return startServer(t, backend{name: "postgres+replica", databaseURL: pair.primaryURL, redisURL: redisURL(t)},
		func(c *bootstrap.Config) {
			c.Database.ReplicaURLs = []string{pair.replicaURL}
			c.Commerce.TopProductsFreshFor = time.Nanosecond
		})
}

// listedReads are the reads a replica serves, each with the statement fragment that shows it
// ran there and the checks of its answer; creates what they read first.
type listedRead struct {
	path      string
	admin     bool
	fragments []string
	check     func(t *testing.T, res response)
}

func listedReads(s *server) []listedRead {
	s.t.Helper()
	crewID := s.createCrew(5)
	if res := s.join(crewID, "replica-member", "join-1"); res.status != http.StatusCreated {
		s.t.Fatalf("join: %d %s", res.status, res.raw)
	}
	challengeID := s.createChallenge(time.Now().Add(time.Hour))
	eventID := s.createEvent(`{"name":"replica seats","seats":3,"mode":"pull"}`)
	items := func(n int) func(t *testing.T, res response) {
		return func(t *testing.T, res response) {
			if got, _ := res.body["items"].([]any); len(got) != n {
				t.Errorf("%d items, want %d: %s", len(got), n, res.raw)
			}
		}
	}
	field := func(name string, want int) func(t *testing.T, res response) {
		return func(t *testing.T, res response) {
			if got := res.num(name); got != want {
				t.Errorf("%s %d, want %d: %s", name, got, want, res.raw)
			}
		}
	}
	return []listedRead{
		{path: "/crews/" + crewID, fragments: []string{`FROM "crews"`}, check: field("currentMembers", 1)},
		{path: "/crews/" + crewID + "/members", fragments: []string{`FROM "crews"`, `FROM "crew_members"`}, check: items(1)},
		{path: "/challenges/" + challengeID, fragments: []string{"FROM challenges"}, check: func(t *testing.T, res response) {
			if res.str("id") != challengeID {
				t.Errorf("challenge %s", res.raw)
			}
		}},
		{path: "/events/" + eventID + "/seats", fragments: []string{"SELECT seat_no, reserved FROM seats"}, check: items(3)},
		{path: "/admin/events/" + eventID + "/queue", admin: true, fragments: []string{"SELECT COUNT(*) FROM seats"}, check: field("remainingSeats", 3)},
		{path: "/admin/outbox", admin: true, fragments: []string{"FROM outbox"}, check: items(0)},
		{path: "/api/products/top", fragments: []string{"product_sales_hourly"}, check: func(t *testing.T, res response) {
			if _, ok := res.body["products"].([]any); !ok {
				t.Errorf("top products %s", res.raw)
			}
		}},
	}
}

func (s *server) read(r listedRead) response {
	s.t.Helper()
	token := s.token("replica-reader")
	if r.admin {
		token = s.adminToken()
	}
	res := s.do("GET", r.path, token, "")
	if res.status != http.StatusOK {
		s.t.Fatalf("GET %s: %d %s", r.path, res.status, res.raw)
	}
	return res
}

// TestReplica_ListedReadsAreServedByTheReplica: with RUSHGATE_DATABASE_REPLICA_URLS set, each
// read the replicas may serve (crew and member lists, a challenge, a seat map, the admin queue
// view and outbox list, top products) runs on the replica, as its pg_stat_statements shows, and
// answers from the replica's data (replay paused, a member who joined since is not listed yet).
// Writes, and the reads that decide them or follow them (a join, a new user's balance, a
// cart), run on the primary: the replica ran nothing else, and the writes are there.
func TestReplica_ListedReadsAreServedByTheReplica(t *testing.T) {
	pair := startReplicatedPostgres(t)
	s := startReplicatedServer(t, pair)
	reads := listedReads(s)
	pair.caughtUp(t)
	mustExec(t, pair.replica, "SELECT pg_stat_statements_reset()")

	for _, r := range reads {
		r.check(t, s.read(r))
	}
	ran := pair.replicaStatements(t)
	for _, r := range reads {
		for _, fragment := range r.fragments {
			if !ranOn(ran, fragment) {
				t.Errorf("GET %s: no statement with %q ran on the replica; it ran %v", r.path, fragment, ran)
			}
		}
	}
	for query := range ran {
		if !strings.HasPrefix(strings.TrimSpace(strings.ToUpper(query)), "SELECT") || strings.Contains(strings.ToUpper(query), "FOR UPDATE") {
			t.Errorf("the replica ran %q: only plain reads belong there", query)
		}
	}

	// Writes and reads-your-own-writes, with the replica's replay paused: none reaches it.
	mustExec(t, pair.replica, "SELECT pg_stat_statements_reset()")
	mustExec(t, pair.replica, "SELECT pg_wal_replay_pause()")
	crewPath := reads[0].path
	if res := s.join(strings.TrimPrefix(crewPath, "/crews/"), "replica-joiner", "join-2"); res.status != http.StatusCreated {
		t.Fatalf("join: %d %s", res.status, res.raw)
	}
	s.createUser("replica-payer", 70)
	if res := s.do("GET", "/api/users/replica-payer/balance", s.token("replica-payer"), ""); res.status != http.StatusOK || res.num("balance") != 70 {
		t.Errorf("balance right after creating the user: %d %s, want 200 with 70", res.status, res.raw)
	}
	productID := s.createProduct("replica product", 10, 5)
	if res := s.addToCart("replica-payer", productID, 2); res.status >= 300 {
		t.Fatalf("add to cart: %d %s", res.status, res.raw)
	}
	if res := s.do("GET", "/api/cart", s.token("replica-payer"), ""); res.status != http.StatusOK || !strings.Contains(string(res.raw), productID) {
		t.Errorf("cart right after adding to it: %d %s, want 200 with the product", res.status, res.raw)
	}
	if ran := pair.replicaStatements(t); len(ran) != 0 {
		t.Errorf("writes and their reads ran on the replica: %v", ran)
	}
	var onPrimary int
	if err := pair.primary.QueryRow("SELECT count(*) FROM crew_members WHERE user_id = 'replica-joiner'").Scan(&onPrimary); err != nil || onPrimary != 1 {
		t.Errorf("the join on the primary: %d members (%v), want 1", onPrimary, err)
	}
	// The member list is the replica's: it has not replayed the join yet.
	members := reads[1]
	members.check(t, s.read(members))

	mustExec(t, pair.replica, "SELECT pg_wal_replay_resume()")
	pair.caughtUp(t)
	if res := s.read(members); len(res.body["items"].([]any)) != 2 {
		t.Errorf("members once the replica caught up: %s, want both", res.raw)
	}
	if n := metricAt(t, s.url, replicaFallbacks); n != 0 {
		t.Errorf("%s = %v with the replica up, want 0", replicaFallbacks, n)
	}
}

// TestReplica_DownFallsBackToThePrimary: with the replica stopped, every read it served answers
// 200 from the primary with the primary's data, and each such read is counted in
// rushgate_db_replica_fallbacks_total.
func TestReplica_DownFallsBackToThePrimary(t *testing.T) {
	pair := startReplicatedPostgres(t)
	s := startReplicatedServer(t, pair)
	reads := listedReads(s)
	pair.caughtUp(t)
	for _, r := range reads {
		r.check(t, s.read(r))
	}
	if n := metricAt(t, s.url, replicaFallbacks); n != 0 {
		t.Fatalf("%s = %v with the replica up, want 0", replicaFallbacks, n)
	}

	if out, err := exec.Command("../../scripts/pg-replica.sh", "stop", pair.dir, "replica").CombinedOutput(); err != nil {
		t.Fatalf("stop the replica: %v\n%s", err, out)
	}
	// A member who joins now is only on the primary, which answers in the replica's place.
	crewID := strings.TrimPrefix(reads[0].path, "/crews/")
	if res := s.join(crewID, "fallback-joiner", "join-2"); res.status != http.StatusCreated {
		t.Fatalf("join: %d %s", res.status, res.raw)
	}
	reads[0].check = func(t *testing.T, res response) {
		if res.num("currentMembers") != 2 {
			t.Errorf("crew from the primary: %s, want 2 members", res.raw)
		}
	}
	reads[1].check = func(t *testing.T, res response) {
		if got, _ := res.body["items"].([]any); len(got) != 2 {
			t.Errorf("members from the primary: %s, want both", res.raw)
		}
	}
	for round := range 2 {
		before := metricAt(t, s.url, replicaFallbacks)
		for _, r := range reads {
			r.check(t, s.read(r))
		}
		// One replica read per route, but two for the member list (the crew, then its members).
		if got, want := metricAt(t, s.url, replicaFallbacks)-before, float64(len(reads)+1); got != want {
			t.Errorf("round %d: %s rose by %v, want %v (one per read)", round+1, replicaFallbacks, got, want)
		}
	}
}
