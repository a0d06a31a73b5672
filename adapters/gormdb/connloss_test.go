package gormdb_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/domain/draw"
	"github.com/rushgate/rushgate/domain/raffle"
	"github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
)

// killConnection ends connection id from another connection of db's pool, as an operator's
// pg_terminate_backend (waiting until the backend has exited) or KILL CONNECTION does.
func killConnection(t *testing.T, name string, db *gormdb.DB, id int64) {
	t.Helper()
	kill := fmt.Sprintf("SELECT pg_terminate_backend(%d, 10000)", id)
	if name == "mysql" {
		kill = fmt.Sprintf("KILL CONNECTION %d", id)
	}
	require.NoError(t, gormdb.Exec(context.Background(), db, kill))
}

// TestInTx_RerunsOnAFreshConnectionATransactionWhoseConnectionDiedBeforeItsCommit kills the
// transaction's own connection between two of its statements: nothing was committed, so InTx
// runs it again on another connection, and its write lands once.
func TestInTx_RerunsOnAFreshConnectionATransactionWhoseConnectionDiedBeforeItsCommit(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := openMigrated(t, fresh, gormdb.Options{MaxOpenConns: 4})
			crewID := insertCrew(t, db)
			var runs, ids []int64

			err := gormdb.NewTxRunner(db).InTx(context.Background(), func(ctx context.Context) error {
				id, err := gormdb.ConnectionID(ctx, db)
				if err != nil {
					return err
				}
				ids = append(ids, id)
				runs = append(runs, 1)
				if len(runs) == 1 {
					killConnection(t, name, db, id)
				}
				return gormdb.Exec(ctx, db, "UPDATE crews SET current_members = current_members + 1 WHERE id = ?", crewID)
			})

			require.NoError(t, err, "the rerun on a fresh connection commits")
			require.Len(t, runs, 2, "one rerun")
			assert.NotEqual(t, ids[0], ids[1], "the rerun ran on another connection")
			assert.Equal(t, 1, currentMembers(t, db, crewID), "the write landed once")
		})
	}
}

// answerBreaker dials connections that, once armed, let the next request it picks reach the
// database and its answer come back, then break: the database did what was asked, but the
// client sees its connection reset and cannot tell.
type answerBreaker struct {
	armed atomic.Bool
	// picks reports the request to break after, given its bytes lower-cased.
	picks func(request []byte) bool
}

// breakAfterCommit picks a COMMIT by how the request ends: Postgres's simple query message
// ("commit" and a NUL), MySQL's COM_QUERY (a multi-statement whose last is COMMIT).
func breakAfterCommit() *answerBreaker {
	return &answerBreaker{picks: func(request []byte) bool {
		return bytes.HasSuffix(request, []byte("commit\x00")) || bytes.HasSuffix(request, []byte("commit"))
	}}
}

// breakAfterExecuting picks the request that carries marker, a value bound to the statement:
// with its parameters, the statement runs (a prepared statement's text goes out before, alone).
func breakAfterExecuting(marker string) *answerBreaker {
	return &answerBreaker{picks: func(request []byte) bool { return bytes.Contains(request, []byte(strings.ToLower(marker))) }}
}

func (b *answerBreaker) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &breakingConn{Conn: conn, breaker: b}, nil
}

type breakingConn struct {
	net.Conn
	breaker *answerBreaker
	// answering is set once the picked request went out on this connection while armed. Read
	// checks it when data arrives, not when called: pgx reads ahead, from another goroutine.
	answering atomic.Bool
}

func (c *breakingConn) Write(b []byte) (int, error) {
	if c.breaker.picks(bytes.ToLower(b)) && c.breaker.armed.CompareAndSwap(true, false) {
		c.answering.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *breakingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil || !c.answering.Load() {
		return n, err
	}
	// What came back is the database's word that it did it; the client never sees it.
	_ = c.Close()
	return 0, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

// TestInTx_DoesNotRerunATransactionWhoseConnectionBrokeDuringItsCommit breaks the transaction's
// connection once its COMMIT has reached the database: the outcome is unknown to InTx (here the
// transaction did commit), so it answers ports.ErrUnavailable without running fn again, and the
// write is not stored twice.
func TestInTx_DoesNotRerunATransactionWhoseConnectionBrokeDuringItsCommit(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			breaker := breakAfterCommit()
			db := openMigrated(t, fresh, gormdb.WithDial(gormdb.Options{MaxOpenConns: 4}, breaker.dial))
			crewID := insertCrew(t, db)
			runs := 0

			breaker.armed.Store(true)
			err := gormdb.NewTxRunner(db).InTx(context.Background(), func(ctx context.Context) error {
				runs++
				return gormdb.Exec(ctx, db, "UPDATE crews SET current_members = current_members + 1 WHERE id = ?", crewID)
			})

			require.ErrorIs(t, err, ports.ErrUnavailable)
			assert.False(t, breaker.armed.Load(), "the COMMIT went out")
			assert.Equal(t, 1, runs, "no rerun after a COMMIT went out")
			assert.Equal(t, 1, currentMembers(t, db, crewID), "the commit the client could not confirm landed, once")
		})
	}
}

// TestLoneWrite_IsNotRunTwiceWhenItsConnectionBrokeAfterItWasSent breaks a lone write's
// connection once the database has run it and answered: neither database/sql nor the driver
// (pgx, go-sql-driver) runs it again, since the driver reports a lost connection, not one that
// sent nothing (driver.ErrBadConn), and the write, not idempotent, lands once.
func TestLoneWrite_IsNotRunTwiceWhenItsConnectionBrokeAfterItWasSent(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			database := fresh(t)
			same := func(testing.TB) testenv.Database { return database }
			setup := openMigrated(t, same, gormdb.Options{})
			crewID := insertCrew(t, setup)
			breaker := breakAfterExecuting(crewID)
			db := openFresh(t, same, gormdb.WithDial(gormdb.Options{MaxOpenConns: 4}, breaker.dial))

			breaker.armed.Store(true)
			err := gormdb.Exec(context.Background(), db, "UPDATE crews SET current_members = current_members + 1 WHERE id = ?", crewID)

			require.ErrorIs(t, err, ports.ErrUnavailable)
			assert.False(t, breaker.armed.Load(), "the write went out")
			assert.Equal(t, 1, currentMembers(t, setup, crewID), "the write the client could not confirm landed, once")
		})
	}
}

// openRaffle stores an open raffle and returns its id.
func openRaffle(t *testing.T, stores ports.RaffleStores) string {
	t.Helper()
	seed, err := draw.NewSeed(rand.Reader)
	require.NoError(t, err)
	r, err := raffle.New(uuid.NewString(), "lost connections", 1, time.Now().Add(time.Hour), "", seed, time.Now())
	require.NoError(t, err)
	require.NoError(t, stores.Raffles.Create(context.Background(), r))
	return r.ID()
}

// killPool ends every connection of db's pool of size n from killer, another pool, once it has
// opened them all at once; they wait in the pool, idle and dead.
func killPool(t *testing.T, name string, db, killer *gormdb.DB, n int) {
	t.Helper()
	ctx := context.Background()
	query := "SELECT pg_backend_pid()"
	if db.Dialect() == gormdb.MySQL {
		query = "SELECT CONNECTION_ID()"
	}
	ids := make([]int64, n)
	for i := range ids {
		conn, err := db.SQL().Conn(ctx)
		require.NoError(t, err)
		require.NoError(t, conn.QueryRowContext(ctx, query).Scan(&ids[i]))
		defer conn.Close()
	}
	for _, id := range ids {
		killConnection(t, name, killer, id)
	}
}

// TestRaffleEntries_ABatchAfterEveryPooledConnectionWasKilledIsStored kills every connection of
// the pool, idle, from another pool: the batch's statement, alone outside a transaction, takes
// a dead connection, then the others, and runs again until it reaches a new one; every entry is
// stored and answered as created, once.
func TestRaffleEntries_ABatchAfterEveryPooledConnectionWasKilledIsStored(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const pool = 4
			ctx := context.Background()
			database := fresh(t)
			same := func(testing.TB) testenv.Database { return database }
			db := openMigrated(t, same, gormdb.Options{MaxOpenConns: pool})
			killer := openFresh(t, same, gormdb.Options{MaxOpenConns: 1})
			stores := gormdb.NewRaffleStores(db)
			raffleID := openRaffle(t, stores)

			killPool(t, name, db, killer, pool)
			users := []string{"entrant-1", "entrant-2", "entrant-3"}
			stored, entered, err := stores.Entries.AddWhileOpen(ctx, raffleID, time.Now(), users)

			require.NoError(t, err, "the batch ran again until it reached a live connection")
			assert.Equal(t, users, stored, "every entry created")
			assert.Empty(t, entered)
			count, err := gormdb.NewRaffleEntryRepository(killer).Count(ctx, raffleID)
			require.NoError(t, err)
			assert.Equal(t, len(users), count, "each entry stored once")
		})
	}
}

// TestRaffleEntries_ABatchWhoseConnectionBrokeAfterItWasSentRunsAgain breaks the batch's
// connection once the database has stored it and answered: the batch runs again on another
// connection, finds its users entered and stores nobody twice; they are answered as already
// entered, by their stored entries, not as created.
func TestRaffleEntries_ABatchWhoseConnectionBrokeAfterItWasSentRunsAgain(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			breaker := breakAfterExecuting("marked-entrant")
			db := openMigrated(t, fresh, gormdb.WithDial(gormdb.Options{MaxOpenConns: 4}, breaker.dial))
			stores := gormdb.NewRaffleStores(db)
			raffleID := openRaffle(t, stores)
			users := []string{"entrant-1", "marked-entrant"}

			breaker.armed.Store(true)
			stored, _, err := stores.Entries.AddWhileOpen(ctx, raffleID, time.Now(), users)

			require.NoError(t, err, "the batch ran again on another connection")
			assert.False(t, breaker.armed.Load(), "the batch's statement went out")
			assert.Empty(t, stored, "the rerun found the users the lost run stored")
			existing, err := stores.Entries.Existing(ctx, raffleID, users)
			require.NoError(t, err)
			assert.Len(t, existing, len(users), "each user entered")
			count, err := stores.Entries.Count(ctx, raffleID)
			require.NoError(t, err)
			assert.Equal(t, len(users), count, "each entry stored once")
		})
	}
}

// TestEventSlots_ASaveAfterEveryPooledConnectionWasKilledIsStored: saving an event's slots, a
// lone UPDATE to a value, runs again past the pool's dead connections as a raffle batch does.
func TestEventSlots_ASaveAfterEveryPooledConnectionWasKilledIsStored(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const pool = 4
			ctx := context.Background()
			database := fresh(t)
			same := func(testing.TB) testenv.Database { return database }
			db := openMigrated(t, same, gormdb.Options{MaxOpenConns: pool})
			killer := openFresh(t, same, gormdb.Options{MaxOpenConns: 1})
			event, err := waiting.NewEvent(uuid.NewString(), "lost connections", 10, 1, waiting.ModePush, 0, time.Now())
			require.NoError(t, err)
			require.NoError(t, gormdb.NewEventRepository(db).Create(ctx, event))

			killPool(t, name, db, killer, pool)
			err = gormdb.NewEventRepository(db).SaveSlots(ctx, event.ID(), 5)

			require.NoError(t, err, "the save ran again until it reached a live connection")
			saved, err := gormdb.NewEventRepository(killer).Get(ctx, event.ID())
			require.NoError(t, err)
			assert.Equal(t, 5, saved.Slots())
		})
	}
}
