package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// replicaFallbacks is the metric counting reads a replica should have served but the primary did.
const replicaFallbacks = "rushgate_db_replica_fallbacks_total"

// replicatedDatabase is a private primary and its replica, started by one of the project's
// scripts, with what a test needs to watch the replica.
type replicatedDatabase struct {
	name                   string
	script, dir            string
	primaryURL, replicaURL string
	primary, replica       *sql.DB
	// readsServed counts the reads the replica ran for clients, the test's own watching aside.
	readsServed func(t *testing.T) int64
	// pause and resume stop and restart the replica's replay of the primary's changes.
	pause, resume string
	// caughtUp waits until the replica has replayed what the primary had written when called.
	caughtUp func(t *testing.T)
}

// replicatedDatabases starts the pairs the replica tests run on, each in its own subtest.
var replicatedDatabases = []struct {
	name  string
	start func(t *testing.T) replicatedDatabase
}{
	{"postgres", startReplicatedPostgres},
	{"mariadb", startReplicatedMariaDB},
}

// startPair runs script start on a private directory owned by owner and opens both servers;
// the script prints the URLs on lines starting urlPrefix + "PRIMARY_URL=" and "REPLICA_URL=".
// The script chooses the ports: it does so only once each server's data is ready, just before
// the server binds, and starts a server again on another port when another process took its
// port first - ports chosen here would stay free for seconds of initdb or mariadb-install-db,
// long enough for another run's test to take one.
func startPair(t *testing.T, name, script, owner, urlPrefix string) replicatedDatabase {
	t.Helper()
	pair := replicatedDatabase{name: name, script: script, dir: filepath.Join(privateDir(t, "rushgate-replica-", owner), "pair")}
	t.Cleanup(func() { _ = exec.Command(pair.script, "stop", pair.dir).Run() })
	out, err := exec.Command(script, "start", pair.dir).CombinedOutput()
	if err != nil {
		t.Fatalf("%s start: %v\n%s", script, err, out)
	}
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), urlPrefix+"PRIMARY_URL="); ok {
			pair.primaryURL = v
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), urlPrefix+"REPLICA_URL="); ok {
			pair.replicaURL = v
		}
	}
	pair.primary, pair.replica = openDatabase(t, pair.primaryURL), openDatabase(t, pair.replicaURL)
	return pair
}

// openDatabase opens a connection pool of the test's own to a database server's URL.
func openDatabase(t *testing.T, url string) *sql.DB {
	t.Helper()
	dialect, dsn, err := gormdb.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open(map[gormdb.Dialect]string{gormdb.Postgres: "pgx", gormdb.MySQL: "mysql"}[dialect], dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// startReplicatedPostgres is a streaming replica (scripts/pg-replica.sh); its reads are counted
// by pg_stat_statements.
func startReplicatedPostgres(t *testing.T) replicatedDatabase {
	t.Helper()
	if bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_basebackup"); len(bins) == 0 {
		testenv.Unreachable(t, "postgres server binaries", fmt.Errorf("no /usr/lib/postgresql/*/bin/pg_basebackup"))
	}
	pair := startPair(t, "postgres", "../../scripts/pg-replica.sh", "postgres", "PG_")
	pair.pause, pair.resume = "SELECT pg_wal_replay_pause()", "SELECT pg_wal_replay_resume()"
	pair.readsServed = func(t *testing.T) int64 {
		t.Helper()
		var n int64
		// The watching statements all name a pg_ function or view, this one included.
		if err := pair.replica.QueryRow("SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query NOT LIKE '%pg\\_%'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	pair.caughtUp = func(t *testing.T) {
		t.Helper()
		var target string
		if err := pair.primary.QueryRow("SELECT pg_current_wal_lsn()::text").Scan(&target); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, testenv.DependencyTimeout, "the replica replays up to "+target, func() error {
			var done bool
			if err := pair.replica.QueryRow("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", target).Scan(&done); err != nil {
				return err
			}
			if !done {
				return errors.New("the replica has not replayed that far")
			}
			return nil
		})
	}
	return pair
}

// startReplicatedMariaDB is a binlog replica (scripts/mariadb-replica.sh); its reads are counted
// by Com_select.
func startReplicatedMariaDB(t *testing.T) replicatedDatabase {
	t.Helper()
	for _, binary := range []string{"mariadb-install-db", "mariadbd", "mariadb"} {
		if _, err := exec.LookPath(binary); err != nil {
			testenv.Unreachable(t, binary+" binary", err)
		}
	}
	pair := startPair(t, "mariadb", "../../scripts/mariadb-replica.sh", "", "MARIADB_")
	pair.pause, pair.resume = "STOP SLAVE SQL_THREAD", "START SLAVE SQL_THREAD"
	pair.readsServed = func(t *testing.T) int64 {
		t.Helper()
		var (
			name string
			n    int64
		)
		if err := pair.replica.QueryRow("SHOW GLOBAL STATUS LIKE 'Com_select'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	pair.caughtUp = func(t *testing.T) {
		t.Helper()
		var (
			position string
			waited   int
		)
		if err := pair.primary.QueryRow("SELECT @@gtid_binlog_pos").Scan(&position); err != nil {
			t.Fatal(err)
		}
		err := pair.replica.QueryRow("SELECT MASTER_GTID_WAIT(?, ?)", position, testenv.DependencyTimeout.Seconds()).Scan(&waited)
		if err != nil || waited != 0 {
			t.Fatalf("the replica has not replayed up to %s within %v: %d %v", position, testenv.DependencyTimeout, waited, err)
		}
	}
	return pair
}

// mustExec runs a statement on db, failing the test on an error.
func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.DependencyTimeout)
	defer cancel()
	if _, err := db.ExecContext(ctx, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// countJoined counts the crew member rows of user on db.
func countJoined(t *testing.T, db *sql.DB, user string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM crew_members WHERE user_id = '" + user + "'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// startReplicatedServer starts a server on the pair's primary with the replica configured, and
// Redis; top products are read anew on every request.
func startReplicatedServer(t *testing.T, pair replicatedDatabase) *server {
	t.Helper()
	return startServer(t, backend{name: pair.name + "+replica", databaseURL: pair.primaryURL, redisURL: redisURL(t)},
		func(c *bootstrap.Config) {
			c.Database.ReplicaURLs = []string{pair.replicaURL}
			c.Commerce.TopProductsFreshFor = time.Nanosecond
		})
}

// listedRead is one read a replica serves: its route, how many reads of the replica it makes,
// and the check of its answer.
type listedRead struct {
	path         string
	admin        bool
	replicaReads int
	check        func(t *testing.T, res response)
}

// listedReads creates a crew with one member, a challenge and an event of three seats, and
// returns the reads a replica serves, of them and of the outbox and top products.
func listedReads(s *server) []listedRead {
	s.t.Helper()
	crewID := s.createCrew(5)
	if res := s.join(crewID, "replica-member", "join-1"); res.status != http.StatusCreated {
		s.t.Fatalf("join: %d %s", res.status, res.raw)
	}
	challengeID := s.createChallenge(time.Now().Add(time.Hour))
	eventID := s.createEvent(`{"name":"replica seats","seats":3,"mode":"pull"}`)
	return []listedRead{
		{path: "/crews/" + crewID, replicaReads: 1, check: hasField("currentMembers", 1)},
		// The crew, then its members.
		{path: "/crews/" + crewID + "/members", replicaReads: 2, check: hasItems(1)},
		{path: "/challenges/" + challengeID, replicaReads: 1, check: func(t *testing.T, res response) {
			if res.str("id") != challengeID {
				t.Errorf("challenge %s, want %s", res.raw, challengeID)
			}
		}},
		{path: "/events/" + eventID + "/seats", replicaReads: 1, check: hasItems(3)},
		{path: "/admin/events/" + eventID + "/queue", admin: true, replicaReads: 1, check: hasField("remainingSeats", 3)},
		{path: "/admin/outbox", admin: true, replicaReads: 1, check: hasItems(0)},
		{path: "/api/products/top", replicaReads: 1, check: func(t *testing.T, res response) {
			if _, ok := res.body["products"].([]any); !ok {
				t.Errorf("top products %s", res.raw)
			}
		}},
	}
}

func hasItems(n int) func(t *testing.T, res response) {
	return func(t *testing.T, res response) {
		t.Helper()
		if got, _ := res.body["items"].([]any); len(got) != n {
			t.Errorf("%d items, want %d: %s", len(got), n, res.raw)
		}
	}
}

func hasField(name string, want int) func(t *testing.T, res response) {
	return func(t *testing.T, res response) {
		t.Helper()
		if got := res.num(name); got != want {
			t.Errorf("%s %d, want %d: %s", name, got, want, res.raw)
		}
	}
}

// read sends the listed read, which must answer 200, and checks its answer.
func (s *server) read(r listedRead) {
	s.t.Helper()
	token := s.token("replica-reader")
	if r.admin {
		token = s.adminToken()
	}
	res := s.do("GET", r.path, token, "")
	if res.status != http.StatusOK {
		s.t.Fatalf("GET %s: %d %s", r.path, res.status, res.raw)
	}
	r.check(s.t, res)
}

// TestReplica_ListedReadsAreServedByTheReplica: with RUSHGATE_DATABASE_REPLICA_URLS set, on a
// Postgres streaming replica and on a MariaDB binlog replica, each read the replicas may serve
// (a crew and its member list, a challenge, a seat map, the admin queue view and outbox list,
// top products) runs on the replica, as its statement counters show. With the replica's replay
// paused, writes and the reads that follow them (a join, a new user's balance, an add to a cart
// and the cart) answer at once and run on the primary only: the replica ran no read for them and
// has none of their rows, while the member list, served by the replica, does not show the new
// member until it has replayed the join.
func TestReplica_ListedReadsAreServedByTheReplica(t *testing.T) {
	for _, database := range replicatedDatabases {
		t.Run(database.name, func(t *testing.T) {
			pair := database.start(t)
			s := startReplicatedServer(t, pair)
			reads := listedReads(s)
			pair.caughtUp(t)
			for _, r := range reads {
				before := pair.readsServed(t)
				s.read(r)
				if got := pair.readsServed(t) - before; got != int64(r.replicaReads) {
					t.Errorf("GET %s: the replica ran %d reads, want %d", r.path, got, r.replicaReads)
				}
			}

			mustExec(t, pair.replica, pair.pause)
			before := pair.readsServed(t)
			crewID := strings.TrimPrefix(reads[0].path, "/crews/")
			if res := s.join(crewID, "replica-joiner", "join-2"); res.status != http.StatusCreated || res.num("currentMembers") != 2 {
				t.Fatalf("join: %d %s, want 201 with 2 members", res.status, res.raw)
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
			if got := pair.readsServed(t) - before; got != 0 {
				t.Errorf("writes and the reads after them ran %d reads on the replica, want none", got)
			}
			if onPrimary, onReplica := countJoined(t, pair.primary, "replica-joiner"), countJoined(t, pair.replica, "replica-joiner"); onPrimary != 1 || onReplica != 0 {
				t.Errorf("the join is on the primary %d times and on the paused replica %d times, want 1 and 0", onPrimary, onReplica)
			}
			s.read(reads[1]) // the replica's member list: one member, not yet the joiner

			mustExec(t, pair.replica, pair.resume)
			pair.caughtUp(t)
			s.read(listedRead{path: reads[1].path, check: hasItems(2)})
			if n := metricAt(t, s.url, replicaFallbacks); n != 0 {
				t.Errorf("%s = %v with the replica up, want 0", replicaFallbacks, n)
			}
		})
	}
}

// TestReplica_DownFallsBackToThePrimary: with the replica stopped, on Postgres and on MariaDB,
// every read it served answers 200 from the primary with the primary's data, and each read the
// replica would have served is counted in rushgate_db_replica_fallbacks_total.
func TestReplica_DownFallsBackToThePrimary(t *testing.T) {
	for _, database := range replicatedDatabases {
		t.Run(database.name, func(t *testing.T) {
			pair := database.start(t)
			s := startReplicatedServer(t, pair)
			reads := listedReads(s)
			pair.caughtUp(t)
			for _, r := range reads {
				s.read(r)
			}
			if n := metricAt(t, s.url, replicaFallbacks); n != 0 {
				t.Fatalf("%s = %v with the replica up, want 0", replicaFallbacks, n)
			}

			if out, err := exec.Command(pair.script, "stop", pair.dir, "replica").CombinedOutput(); err != nil {
				t.Fatalf("stop the replica: %v\n%s", err, out)
			}
			// A member who joins now is only on the primary, which answers in the replica's place.
			crewID := strings.TrimPrefix(reads[0].path, "/crews/")
			if res := s.join(crewID, "fallback-joiner", "join-2"); res.status != http.StatusCreated {
				t.Fatalf("join: %d %s", res.status, res.raw)
			}
			reads[0].check, reads[1].check = hasField("currentMembers", 2), hasItems(2)
			for round := range 2 {
				before, want := metricAt(t, s.url, replicaFallbacks), 0
				for _, r := range reads {
					s.read(r)
					want += r.replicaReads
				}
				if got := metricAt(t, s.url, replicaFallbacks) - before; got != float64(want) {
					t.Errorf("round %d: %s rose by %v, want %d (one per read)", round+1, replicaFallbacks, got, want)
				}
			}
		})
	}
}
