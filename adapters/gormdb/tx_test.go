package gormdb_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/test/testenv"
)

// dialects are the real databases every test here runs on.
var dialects = map[string]func(testing.TB) testenv.Database{
	"postgres": testenv.Postgres,
	"mysql":    testenv.MySQL,
}

// openMigrated opens a fresh, migrated database with opts.
func openMigrated(t *testing.T, fresh func(testing.TB) testenv.Database, opts gormdb.Options) *gormdb.DB {
	t.Helper()
	db := openFresh(t, fresh, opts)
	require.NoError(t, gormdb.Migrate(context.Background(), db))
	return db
}

// openFresh opens a fresh, empty database with opts, closed when the test ends. Timeouts opts
// leaves zero are testenv's.
func openFresh(t *testing.T, fresh func(testing.TB) testenv.Database, opts gormdb.Options) *gormdb.DB {
	t.Helper()
	if opts.ConnectTimeout == 0 {
		opts.ConnectTimeout = testenv.DBOptions().ConnectTimeout
	}
	if opts.TxTimeout == 0 {
		opts.TxTimeout = testenv.DBOptions().TxTimeout
	}
	db, err := gormdb.Open(context.Background(), fresh(t).URL, opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	return db
}

// insertCrew stores an empty crew of capacity 10 and returns its id.
func insertCrew(t *testing.T, db *gormdb.DB) string {
	t.Helper()
	c, err := crew.New(uuid.NewString(), "deadlock", 10, time.Now().UTC())
	require.NoError(t, err)
	require.NoError(t, gormdb.NewCrewRepository(db).Create(context.Background(), c))
	return c.ID()
}

func currentMembers(t *testing.T, db *gormdb.DB, id string) int {
	t.Helper()
	c, err := gormdb.NewCrewRepository(db).Get(context.Background(), id)
	require.NoError(t, err)
	return c.CurrentMembers()
}

// TestInTx_RetriesTheDeadlockVictimAndBothCommit has two transactions lock two rows in opposite
// order. The database aborts one to break the deadlock; InTx runs it again, and both commit.
func TestInTx_RetriesTheDeadlockVictimAndBothCommit(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Postgres looks for deadlocks only after deadlock_timeout (1s by default).
			db := openMigrated(t, fresh, gormdb.Options{TxTimeout: 15 * time.Second})
			runner := gormdb.NewTxRunner(db)
			a, b := insertCrew(t, db), insertCrew(t, db)
			bump := func(ctx context.Context, id string) error {
				return gormdb.Exec(ctx, db, "UPDATE crews SET current_members = current_members + 1 WHERE id = ?", id)
			}

			var bothHoldTheirFirstRow sync.WaitGroup
			bothHoldTheirFirstRow.Add(2)
			var runs atomic.Int32
			bumpBoth := func(first, second string) error {
				attempt := 0
				return runner.InTx(context.Background(), func(ctx context.Context) error {
					attempt++
					runs.Add(1)
					if err := bump(ctx, first); err != nil {
						return err
					}
					if attempt == 1 {
						bothHoldTheirFirstRow.Done()
						bothHoldTheirFirstRow.Wait()
					}
					return bump(ctx, second)
				})
			}
			errs := make([]error, 2)
			var wg sync.WaitGroup
			wg.Go(func() { errs[0] = bumpBoth(a, b) })
			wg.Go(func() { errs[1] = bumpBoth(b, a) })
			wg.Wait()

			require.NoError(t, errs[0])
			require.NoError(t, errs[1])
			// The victim ran again (and, rarely, deadlocked the other on its rerun).
			assert.GreaterOrEqual(t, runs.Load(), int32(3), "a deadlock victim was rerun")
			assert.Equal(t, 2, currentMembers(t, db, a), "each transaction's bump landed once")
			assert.Equal(t, 2, currentMembers(t, db, b), "each transaction's bump landed once")
		})
	}
}

// TestInTx_RetryBounds: a conflict is retried up to TxAttempts runs, a connection lost before
// the commit once for each connection of the pool, and the last run's error comes back unchanged
// (translate makes it unavailable, see TestTranslate); other errors (a connection that could not
// be opened among them), and a rerunnable failure once the caller's context has ended, are not
// retried.
func TestInTx_RetryBounds(t *testing.T) {
	deadlock := &pgconn.PgError{Code: "40P01"}
	cases := []struct {
		name     string
		err      error
		cancel   bool // the caller's context ends during the run
		wantRuns int32
	}{
		{"postgres deadlock", deadlock, false, 4},
		{"postgres serialization failure", &pgconn.PgError{Code: "40001"}, false, 4},
		{"mysql deadlock", &mysql.MySQLError{Number: 1213}, false, 4},
		{"caller's context ended", deadlock, true, 1},
		{"postgres connection terminated", &pgconn.PgError{Code: "57P01", Severity: "FATAL"}, false, 6},
		{"mariadb connection killed", &mysql.MySQLError{Number: 1927}, false, 6},
		{"mysql connection lost", mysql.ErrInvalidConn, false, 6},
		{"connection reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, false, 6},
		{"connection lost, caller's context ended", mysql.ErrInvalidConn, true, 1},
		{"connection refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, false, 1},
		{"statement timeout", &pgconn.PgError{Code: "57014"}, false, 1},
		{"not a conflict", errors.New("boom"), false, 1},
		{"duplicate key", &pgconn.PgError{Code: "23505"}, false, 1},
	}
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := openMigrated(t, fresh, gormdb.Options{TxAttempts: 4, MaxOpenConns: 5})
			runner := gormdb.NewTxRunner(db)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					var runs atomic.Int32
					failure := gormdb.Translate(tc.err)

					err := runner.InTx(ctx, func(context.Context) error {
						runs.Add(1)
						if tc.cancel {
							cancel()
						}
						return failure
					})

					assert.Equal(t, tc.wantRuns, runs.Load())
					assert.Same(t, failure, err, "fn's error comes back unchanged")
				})
			}
		})
	}
}

// A filled pool has all its connections open before the first request: a burst as large as
// the pool opens none.
func TestFill_OpensThePoolBeforeTheFirstBurst(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var dials atomic.Int64
			dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}
			const size = 4
			db := openFresh(t, fresh, gormdb.WithDial(gormdb.Options{MaxOpenConns: size}, dial))
			require.NoError(t, db.Fill(ctx))
			assert.EqualValues(t, size, dials.Load(), "connections opened, Open's ping included")

			burst := make([]*sql.Conn, 0, size)
			for range size {
				c, err := db.SQL().Conn(ctx)
				require.NoError(t, err)
				require.NoError(t, c.PingContext(ctx))
				burst = append(burst, c)
			}
			for _, c := range burst {
				require.NoError(t, c.Close())
			}
			assert.EqualValues(t, size, dials.Load(), "connections opened once the pool was filled and all of it used")
		})
	}
}
