package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// TestDatabaseConnectionsKilled_EveryFlowAnswersThenServesAgain kills every connection the
// server holds to a private Postgres (pg_terminate_backend) and MariaDB (KILL CONNECTION) while
// herds of every guarded flow, cart adds, raffle entries and seat reservations are mid-flight,
// twice: the database stays up, so only the transactions on those connections die. Every answer
// is a success or 503 UNAVAILABLE with Retry-After (never a 500), the next request of each flow
// succeeds on a new connection without a restart, and what the flows stored is consistent,
// every success included and none stored twice.
//
// A transaction whose connection died before its COMMIT went out runs again on a new one, so
// few answers are 503 (without it, most were): those of a transaction whose connection died
// during its COMMIT, whose outcome is unknown. Such a batch answers its requests together, a
// whole herd at most, and a few may be committing when the kill strikes: at most half the
// answers are 503. A batch of raffle entries is one statement outside a transaction that
// stores nobody twice, run again on a new connection whatever the kill caught it doing: no
// raffle entry answers 503.
func TestDatabaseConnectionsKilled_EveryFlowAnswersThenServesAgain(t *testing.T) {
	for _, newDatabase := range []func(*testing.T) privateDatabase{startPrivatePostgres, startPrivateMariaDB} {
		db := newDatabase(t)
		t.Run(db.name, func(t *testing.T) {
			refused, answers, refusedBy := herdThroughAFault(t, db, func(t *testing.T, s *server) func() {
				killer, err := s.db.Conn(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = killer.Close() })
				return func() {
					var killed []int
					for range 2 { // the second kill lands on the transactions that replaced the first
						n, err := killConnections(killer, s.dialect)
						if err != nil {
							t.Fatalf("kill the server's connections: %v", err)
						}
						killed = append(killed, n)
						time.Sleep(20 * time.Millisecond)
					}
					t.Logf("killed %v connections mid-herd", killed)
				}
			}, func(*testing.T) {})
			if refused > answers/2 {
				t.Errorf("%d of %d answers were 503, want at most half: a transaction whose connection died before its COMMIT is run again",
					refused, answers)
			}
			if n := refusedBy[raffleEntryFlowName]; n > 0 {
				t.Errorf("%d raffle entries answered 503: a batch whose connection was lost runs again on a new one", n)
			}
		})
	}
}

// TestDatabaseRestartedMidHerd_EveryFlowAnswersThenServesAgain stops a private Postgres
// (immediate) and MariaDB (SIGKILL) while herds of every flow are mid-flight and starts it
// again: every answer is a success or 503 with Retry-After, each flow succeeds again without a
// restart of the server, and no success was lost.
func TestDatabaseRestartedMidHerd_EveryFlowAnswersThenServesAgain(t *testing.T) {
	for _, newDatabase := range []func(*testing.T) privateDatabase{startPrivatePostgres, startPrivateMariaDB} {
		db := newDatabase(t)
		t.Run(db.name, func(t *testing.T) {
			herdThroughAFault(t, db, func(t *testing.T, _ *server) func() {
				return func() { db.stop(t) }
			}, db.start)
		})
	}
}

// herdThroughAFault runs herds of every guarded flow, cart adds, raffle entries and seat
// reservations on a server of db: one healthy, then one during which fault (built once the
// server runs) strikes at the first answer. Every answer of that herd must be a success or 503
// UNAVAILABLE with Retry-After; after recover, one request of each flow must succeed within
// 30 s, and what the flows stored must be consistent, every success included. It returns how
// many answers of the herd the fault caught were 503, of how many, and how many of each flow
// (by name) were.
func herdThroughAFault(t *testing.T, db privateDatabase, newFault func(t *testing.T, s *server) func(), recover func(t *testing.T)) (
	refused, answers int, refusedBy map[string]int) {
	s := startServer(t, backend{name: db.name, databaseURL: db.url, redisURL: testenv.StartPrivateRedis(t).URL}, productionTimeouts,
		func(c *bootstrap.Config) { c.Guard.LockTTL, c.Guard.LockRetries = testenv.LockTTL, testenv.LockRetries })
	flows, consistent := guardedFlows(s)
	cart, cartConsistent := cartAddFlow(s)
	entry, entriesConsistent := raffleEntryFlow(s)
	seat, seatsConsistent := seatReservationFlow(s)
	flows = append(flows, cart, entry, seat)
	fault := newFault(t, s)

	testkit.Eventually(t, 30*time.Second, "a healthy herd of every flow", func() error {
		for name, answers := range herd(flows, func() {})() {
			for _, a := range answers {
				if a.err != nil || a.status >= 300 {
					return fmt.Errorf("%s before the fault: %v", name, a)
				}
			}
		}
		return nil
	})

	var once sync.Once
	first := make(chan struct{})
	caught := herd(flows, func() { once.Do(func() { close(first) }) })
	<-first
	struck := time.Now()
	fault()
	answers = len(flows) * herdSize
	refusedBy = map[string]int{}
	var firstRefusal time.Time
	for name, got := range caught() {
		for _, a := range got {
			unavailable := a.err == nil && a.status == http.StatusServiceUnavailable && a.code == "UNAVAILABLE" && a.retryAfter != ""
			switch {
			case unavailable:
				refused++
				refusedBy[name]++
				if firstRefusal.IsZero() || a.at.Before(firstRefusal) {
					firstRefusal = a.at
				}
			case a.err != nil || a.status >= 300:
				t.Errorf("%s caught by the fault: want a success or 503 UNAVAILABLE with Retry-After, got %v", name, a)
			}
		}
	}
	if refused > 0 {
		t.Logf("%d of %d answers were 503 (%v), the first %v after the fault struck", refused, answers, refusedBy,
			firstRefusal.Sub(struck).Round(time.Millisecond))
	} else {
		t.Logf("none of %d answers was 503", answers)
	}

	recover(t)
	recovering := time.Now()
	for _, f := range flows {
		testkit.Eventually(t, 30*time.Second, f.name+" succeeds again", func() error {
			if a := f.send(); a.err != nil || a.status >= 300 {
				return fmt.Errorf("answered %v", a)
			}
			return nil
		})
	}
	t.Logf("every flow succeeded again within %v of the database being back", time.Since(recovering).Round(time.Millisecond))
	consistent()
	cartConsistent()
	entriesConsistent()
	seatsConsistent()
	return refused, answers, refusedBy
}

// killConnections ends every connection to the database but conn's own, as an operator's
// pg_terminate_backend or KILL CONNECTION does, and answers how many it ended.
func killConnections(conn *sql.Conn, dialect gormdb.Dialect) (int, error) {
	ctx := context.Background()
	if dialect == gormdb.Postgres {
		var n int
		err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()) AS ended`).Scan(&n)
		return n, err
	}
	rows, err := conn.QueryContext(ctx, `SELECT id FROM information_schema.processlist
		WHERE id <> CONNECTION_ID() AND user = 'root' AND db = DATABASE()`)
	if err != nil {
		return 0, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		// A connection that closed since the list was read is "unknown thread id" (1094).
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err == nil {
			n++
		}
	}
	return n, nil
}
