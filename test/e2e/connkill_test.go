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
// is a success or 503 UNAVAILABLE with Retry-After (never a 500), the next requests succeed on
// new connections without a restart, and what the flows stored is consistent, every success
// included.
func TestDatabaseConnectionsKilled_EveryFlowAnswersThenServesAgain(t *testing.T) {
	for _, newDatabase := range []func(*testing.T) privateDatabase{startPrivatePostgres, startPrivateMariaDB} {
		db := newDatabase(t)
		t.Run(db.name, func(t *testing.T) {
			s := startServer(t, backend{name: db.name, databaseURL: db.url, redisURL: startPrivateRedis(t).url}, productionTimeouts,
				func(c *bootstrap.Config) { c.Guard.LockTTL, c.Guard.LockRetries = testenv.LockTTL, testenv.LockRetries })
			flows, consistent := guardedFlows(s)
			cart, cartConsistent := cartAddFlow(s)
			entry, entriesConsistent := raffleEntryFlow(s)
			seat, seatsConsistent := seatReservationFlow(s)
			flows = append(flows, cart, entry, seat)
			killer, err := s.db.Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer killer.Close()
			killAll := func() int {
				n, err := killConnections(killer, s.dialect)
				if err != nil {
					t.Fatalf("kill the server's connections: %v", err)
				}
				return n
			}

			testkit.Eventually(t, 30*time.Second, "a healthy herd of every flow", func() error {
				for name, answers := range herd(flows, func() {})() {
					for _, a := range answers {
						if a.err != nil || a.status >= 300 {
							return fmt.Errorf("%s before the kill: %v", name, a)
						}
					}
				}
				return nil
			})

			var (
				once   sync.Once
				first  = make(chan struct{})
				killed []int
			)
			caught := herd(flows, func() { once.Do(func() { close(first) }) })
			<-first
			killed = append(killed, killAll())
			time.Sleep(20 * time.Millisecond) // a second kill lands on the transactions that replaced the first
			killed = append(killed, killAll())
			refused := 0
			for name, answers := range caught() {
				for _, a := range answers {
					unavailable := a.err == nil && a.status == http.StatusServiceUnavailable && a.code == "UNAVAILABLE" && a.retryAfter != ""
					if unavailable {
						refused++
					} else if a.err != nil || a.status >= 300 {
						t.Errorf("%s caught by the kill: want a success or 503 UNAVAILABLE with Retry-After, got %v", name, a)
					}
				}
			}
			t.Logf("killed %v connections mid-herd; %d of %d answers were 503", killed, refused, len(flows)*herdSize)

			recovered := time.Now()
			for _, f := range flows {
				if a := f.send(); a.err != nil || a.status >= 300 {
					t.Errorf("%s after the kill: %v, want a success on a new connection", f.name, a)
				}
			}
			t.Logf("one request of each flow after the kill answered within %v", time.Since(recovered).Round(time.Millisecond))
			consistent()
			cartConsistent()
			entriesConsistent()
			seatsConsistent()
		})
	}
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
