package gormdb_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/adapters/memory/memorytest"
	"github.com/rushgate/rushgate/adapters/system"
	apporder "github.com/rushgate/rushgate/application/order"
	appwaiting "github.com/rushgate/rushgate/application/waiting"
	"github.com/rushgate/rushgate/domain/crew"
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

// answerBreaker dials connections that, while armed, let the next request it picks reach the
// database and its answer come back, then break: the database did what was asked, but the
// client sees its connection reset and cannot tell.
type answerBreaker struct {
	// armed is how many picked requests are still to break.
	armed atomic.Int32
	// passes is how many reads of the answer come through before the break: 0 breaks the
	// first, before the client sees any of it.
	passes int32
	// drops breaks before the picked request is sent instead: the client believes it sent it,
	// the database never sees it and ends the transaction with the connection.
	drops bool
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

// breakAfterExecuting picks a request that carries one of markers, values bound to the
// statement: with its parameters, the statement runs (a prepared statement's text goes out
// before, alone).
func breakAfterExecuting(markers ...string) *answerBreaker {
	return &answerBreaker{picks: func(request []byte) bool {
		return slices.ContainsFunc(markers, func(marker string) bool {
			return bytes.Contains(request, []byte(strings.ToLower(marker)))
		})
	}}
}

func (b *answerBreaker) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &breakingConn{Conn: conn, breaker: b}, nil
}

// disarmOne takes one of the breaks armed, if any is left.
func (b *answerBreaker) disarmOne() bool {
	for {
		n := b.armed.Load()
		if n == 0 {
			return false
		}
		if b.armed.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

type breakingConn struct {
	net.Conn
	breaker *answerBreaker
	// answering is set once the picked request went out on this connection while armed. Read
	// checks it when data arrives, not when called: pgx reads ahead, from another goroutine.
	answering atomic.Bool
	// passed counts the reads of the answer let through.
	passed atomic.Int32
}

func (c *breakingConn) Write(b []byte) (int, error) {
	if c.breaker.picks(bytes.ToLower(b)) && c.breaker.disarmOne() {
		c.answering.Store(true)
		if c.breaker.drops {
			// A read already waiting (pgx reads ahead) ends with the connection.
			_ = c.Close()
			return len(b), nil
		}
	}
	return c.Conn.Write(b)
}

func (c *breakingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	dropped := c.breaker.drops && c.answering.Load()
	if !dropped && (err != nil || !c.answering.Load() || c.passed.Add(1) <= c.breaker.passes) {
		return n, err
	}
	// What came back is the database's word that it did it; the client never sees it.
	_ = c.Close()
	return 0, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

// TestInTx_DoesNotRerunATransactionWhoseConnectionBrokeDuringItsCommit breaks the transaction's
// connection once its COMMIT has reached the database: the outcome is unknown to InTx (here the
// transaction did commit), so it answers ports.ErrCommitOutcomeUnknown (a ports.ErrUnavailable)
// without running fn again, and the write is not stored twice.
func TestInTx_DoesNotRerunATransactionWhoseConnectionBrokeDuringItsCommit(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			breaker := breakAfterCommit()
			db := openMigrated(t, fresh, gormdb.WithDial(gormdb.Options{MaxOpenConns: 4}, breaker.dial))
			crewID := insertCrew(t, db)
			runs := 0

			breaker.armed.Store(1)
			err := gormdb.NewTxRunner(db).InTx(context.Background(), func(ctx context.Context) error {
				runs++
				return gormdb.Exec(ctx, db, "UPDATE crews SET current_members = current_members + 1 WHERE id = ?", crewID)
			})

			require.ErrorIs(t, err, ports.ErrUnavailable)
			require.ErrorIs(t, err, ports.ErrCommitOutcomeUnknown, "the caller may read whether it committed")
			assert.Zero(t, breaker.armed.Load(), "the COMMIT went out")
			assert.Equal(t, 1, runs, "no rerun after a COMMIT went out")
			assert.Equal(t, 1, currentMembers(t, db, crewID), "the commit the client could not confirm landed, once")
		})
	}
}

// TestReserve_ACommitWhoseAnswerWasLostAnswersTheStoredReservation breaks a seat reservation's
// connection once its COMMIT has reached the database: the transaction committed, and the
// reservation, read back on another connection, is the client's answer rather than a 503 whose
// retry would find the seat taken.
func TestReserve_ACommitWhoseAnswerWasLostAnswersTheStoredReservation(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			breaker := breakAfterCommit()
			db := openMigrated(t, fresh, gormdb.WithDial(gormdb.Options{MaxOpenConns: 4}, breaker.dial))
			env := memorytest.New(memorytest.WithStores(gormdb.NewStores(db)))
			svc := appwaiting.NewService(appwaiting.Deps{Tx: env.Stores.Tx, Events: env.Stores.Events, Seats: env.Stores.Seats,
				Reservations: env.Stores.Reservations, Room: env.Coord.WaitingRoom, Guard: env.Guard, Clock: env.Clock,
				IDs: system.UUIDs{}}, appwaiting.Config{})
			event, err := svc.CreateEvent(ctx, appwaiting.CreateEventCommand{Name: "lost commit", Seats: 2, Slots: 2, Mode: "pull"})
			require.NoError(t, err)
			_, _, err = svc.Enter(ctx, event.ID, "u1")
			require.NoError(t, err)
			token, _, err := svc.Claim(ctx, event.ID, "u1")
			require.NoError(t, err)

			breaker.armed.Store(1)
			view, err := svc.Reserve(ctx, appwaiting.ReserveCommand{EventID: event.ID, SeatID: "1", UserID: "u1", Token: token.Token})

			require.NoError(t, err, "the reservation committed")
			assert.Zero(t, breaker.armed.Load(), "the COMMIT's answer was lost")
			stored, found, err := env.Stores.Reservations.Find(ctx, event.ID, 1)
			require.NoError(t, err)
			require.True(t, found, "the seat's reservation is stored")
			assert.Equal(t, stored.ID, view.ID, "the answer is the stored reservation")
			count, err := env.Stores.Reservations.Count(ctx, event.ID)
			require.NoError(t, err)
			assert.Equal(t, 1, count, "stored once")
		})
	}
}

// TestAddToCart_ACommitWhoseAnswerWasLostIsAnsweredByTheCartsLastAdd breaks a cart add's
// connection during its COMMIT: once the COMMIT has reached the database (it committed), the add
// is answered as added, from the cart's last add read back on another connection, rather than a
// 503 whose retry would add the units a second time; before it was sent (it did not commit),
// the add answers 503 and its retry adds the units once.
func TestAddToCart_ACommitWhoseAnswerWasLostIsAnsweredByTheCartsLastAdd(t *testing.T) {
	for name, fresh := range dialects {
		for _, committed := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/committed=%v", name, committed), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				breaker := breakAfterCommit()
				breaker.drops = !committed
				db := openMigrated(t, fresh, gormdb.WithDial(gormdb.Options{MaxOpenConns: 4}, breaker.dial))
				shop := memorytest.NewShop(t, memorytest.WithStores(gormdb.NewStores(db)))
				product := shop.Product(100, 10)
				add := apporder.AddToCartCommand{UserID: "buyer", ProductID: product, Quantity: 2}
				_, err := shop.Orders.AddToCart(ctx, apporder.AddToCartCommand{UserID: "buyer", ProductID: product, Quantity: 1})
				require.NoError(t, err)
				quantity := func() int {
					cart, err := shop.Orders.Cart(ctx, "buyer")
					require.NoError(t, err)
					require.Len(t, cart.Items, 1)
					return cart.Items[0].Quantity
				}

				breaker.armed.Store(1)
				view, err := shop.Orders.AddToCart(ctx, add)

				assert.Zero(t, breaker.armed.Load(), "the COMMIT's answer was lost")
				if !committed {
					require.ErrorIs(t, err, ports.ErrUnavailable, "not committed: answered %+v", view)
					require.ErrorIs(t, err, ports.ErrCommitOutcomeUnknown, "the COMMIT went out as far as the client knows")
					assert.Equal(t, 1, quantity(), "nothing added")
					retried, err := shop.Orders.AddToCart(ctx, add)
					require.NoError(t, err, "the retry")
					assert.Equal(t, 3, retried.Quantity, "the retry added the units once")
					assert.Equal(t, 3, quantity())
					return
				}
				require.NoError(t, err, "the add committed")
				assert.Equal(t, 3, view.Quantity, "the answer is the line's new total")
				assert.Equal(t, 3, quantity(), "the units added once")
			})
		}
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

			breaker.armed.Store(1)
			err := gormdb.Exec(context.Background(), db, "UPDATE crews SET current_members = current_members + 1 WHERE id = ?", crewID)

			require.ErrorIs(t, err, ports.ErrUnavailable)
			assert.Zero(t, breaker.armed.Load(), "the write went out")
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

// killPool ends every connection of pool, of size n, from killer, another pool, once it has
// opened them all at once; they wait in the pool, idle and dead.
func killPool(t *testing.T, name string, pool *sql.DB, killer *gormdb.DB, n int) {
	t.Helper()
	ctx := context.Background()
	query := "SELECT pg_backend_pid()"
	if name == "mysql" {
		query = "SELECT CONNECTION_ID()"
	}
	ids := make([]int64, n)
	for i := range ids {
		conn, err := pool.Conn(ctx)
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
			db, killer := poolAndKiller(t, fresh, pool)
			stores := gormdb.NewRaffleStores(db)
			raffleID := openRaffle(t, stores)

			killPool(t, name, db.SQL(), killer, pool)
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

			breaker.armed.Store(1)
			stored, _, err := stores.Entries.AddWhileOpen(ctx, raffleID, time.Now(), users)

			require.NoError(t, err, "the batch ran again on another connection")
			assert.Zero(t, breaker.armed.Load(), "the batch's statement went out")
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
			db, killer := poolAndKiller(t, fresh, pool)
			event, err := waiting.NewEvent(uuid.NewString(), "lost connections", 10, 1, waiting.ModePush, 0, time.Now())
			require.NoError(t, err)
			require.NoError(t, gormdb.NewEventRepository(db).Create(ctx, event))

			killPool(t, name, db.SQL(), killer, pool)
			err = gormdb.NewEventRepository(db).SaveSlots(ctx, event.ID(), 5)

			require.NoError(t, err, "the save ran again until it reached a live connection")
			saved, err := gormdb.NewEventRepository(killer).Get(ctx, event.ID())
			require.NoError(t, err)
			assert.Equal(t, 5, saved.Slots())
		})
	}
}

// TestLoneReads_AnswerAfterEveryPooledConnectionWasKilled kills every connection of the pool,
// idle, before each read, hand-written (an event, its free seats) or through GORM (a crew, its
// members): a read, alone outside a transaction, takes a dead connection, then the others, and
// runs again until it reaches a new one, and answers.
func TestLoneReads_AnswerAfterEveryPooledConnectionWasKilled(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const pool = 4
			ctx := context.Background()
			db, killer := poolAndKiller(t, fresh, pool)
			event, err := waiting.NewEvent(uuid.NewString(), "lost connections", 10, 1, waiting.ModePush, 0, time.Now())
			require.NoError(t, err)
			require.NoError(t, gormdb.NewEventRepository(db).Create(ctx, event))
			require.NoError(t, gormdb.NewSeatRepository(db).Create(ctx, event.ID(), event.Seats()))
			crewID := insertCrew(t, db)
			require.NoError(t, gormdb.NewCrewMemberRepository(db).Add(ctx, crew.Member{CrewID: crewID, UserID: "member-1", JoinedAt: time.Now()}))

			killPool(t, name, db.SQL(), killer, pool)
			got, err := gormdb.NewEventRepository(db).Get(ctx, event.ID())
			require.NoError(t, err, "the event's read ran again until it reached a live connection")
			assert.Equal(t, event.ID(), got.ID())

			killPool(t, name, db.SQL(), killer, pool)
			free, err := gormdb.NewSeatRepository(db).CountFree(ctx, event.ID())
			require.NoError(t, err, "the free seats' count ran again until it reached a live connection")
			assert.Equal(t, event.Seats(), free)

			killPool(t, name, db.SQL(), killer, pool)
			c, err := gormdb.NewCrewRepository(db).Get(ctx, crewID)
			require.NoError(t, err, "the crew's read ran again until it reached a live connection")
			assert.Equal(t, crewID, c.ID())

			killPool(t, name, db.SQL(), killer, pool)
			members, err := gormdb.NewCrewMemberRepository(db).List(ctx, crewID, nil, 10)
			require.NoError(t, err, "the members' read ran again until it reached a live connection")
			require.Len(t, members, 1, "each member listed once")
			assert.Equal(t, "member-1", members[0].UserID)
		})
	}
}

// TestLoneReads_RunAgainWhenTheirConnectionBrokeAfterTheyWereSent breaks a read's connection
// once the database has answered it, hand-written (an event) or through GORM (a crew): a read
// has no effect, so it runs again on another connection, and answers.
func TestLoneReads_RunAgainWhenTheirConnectionBrokeAfterTheyWereSent(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			database := fresh(t)
			same := func(testing.TB) testenv.Database { return database }
			setup := openMigrated(t, same, gormdb.Options{})
			event, err := waiting.NewEvent(uuid.NewString(), "lost connections", 10, 1, waiting.ModePush, 0, time.Now())
			require.NoError(t, err)
			require.NoError(t, gormdb.NewEventRepository(setup).Create(ctx, event))
			crewID := insertCrew(t, setup)
			breaker := breakAfterExecuting(event.ID(), crewID)
			db := openFresh(t, same, gormdb.WithDial(gormdb.Options{MaxOpenConns: 4}, breaker.dial))

			breaker.armed.Store(1)
			got, err := gormdb.NewEventRepository(db).Get(ctx, event.ID())
			require.NoError(t, err, "the event's read ran again on another connection")
			assert.Zero(t, breaker.armed.Load(), "the event's read went out")
			assert.Equal(t, event.ID(), got.ID())

			breaker.armed.Store(1)
			c, err := gormdb.NewCrewRepository(db).Get(ctx, crewID)
			require.NoError(t, err, "the crew's read ran again on another connection")
			assert.Zero(t, breaker.armed.Load(), "the crew's read went out")
			assert.Equal(t, crewID, c.ID())
		})
	}
}

// TestLoneReads_AreNotRunAgainWhenTheirConnectionBrokeAfterRowsWereHandedOver breaks a long
// read's connection once its first rows reached the caller: run again, it would hand them over a
// second time, so it answers ports.ErrUnavailable and the caller saw each row once.
func TestLoneReads_AreNotRunAgainWhenTheirConnectionBrokeAfterRowsWereHandedOver(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			database := fresh(t)
			marker := uuid.NewString()
			breaker := breakAfterExecuting(marker)
			breaker.passes = 1
			db := openFresh(t, func(testing.TB) testenv.Database { return database }, gormdb.WithDial(gormdb.Options{MaxOpenConns: 4}, breaker.dial))
			// A million rows in order, far more than one read of the answer brings.
			const million = `WITH RECURSIVE s (g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < 1000)
				SELECT a.g * 1000 + b.g FROM s a CROSS JOIN s b WHERE ? <> '' ORDER BY 1`

			breaker.armed.Store(1)
			var seen []int64
			err := gormdb.Query(context.Background(), db, gormdb.Bind(db.Dialect(), million), []any{marker}, func(rows *sql.Rows) error {
				var g int64
				if err := rows.Scan(&g); err != nil {
					return err
				}
				seen = append(seen, g)
				return nil
			})

			require.ErrorIs(t, err, ports.ErrUnavailable)
			assert.Zero(t, breaker.armed.Load(), "the read went out")
			require.NotEmpty(t, seen, "rows were handed over before the break")
			assert.Less(t, len(seen), 1000*1000, "the break came before the last row")
			assert.True(t, slices.IsSorted(seen) && len(slices.Compact(slices.Clone(seen))) == len(seen),
				"every row handed over once: %d rows from %d to %d", len(seen), seen[0], seen[len(seen)-1])
		})
	}
}

// TestLoneReads_OnAReplicaRunAgainWhenTheDatabaseLostTheirConnectionToo breaks a read's
// connection to the replica once the replica has answered it, then its connection to the
// database the read falls back to: it runs again, on the database while the replica is skipped,
// and answers.
func TestLoneReads_OnAReplicaRunAgainWhenTheDatabaseLostTheirConnectionToo(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			database := fresh(t)
			same := func(testing.TB) testenv.Database { return database }
			setup := openMigrated(t, same, gormdb.Options{})
			crewID := insertCrew(t, setup)
			breaker := breakAfterExecuting(crewID)
			var fellBack atomic.Int64
			opts := gormdb.Options{MaxOpenConns: 4, ReplicaURLs: []string{database.URL}, ReplicaFallback: func() { fellBack.Add(1) }}
			db := openFresh(t, same, gormdb.WithDial(opts, breaker.dial))

			breaker.armed.Store(2)
			c, err := gormdb.NewCrewRepository(db).Get(ports.AllowStale(ctx), crewID)

			require.NoError(t, err, "the read ran again on another connection")
			assert.Zero(t, breaker.armed.Load(), "the replica and the database were both sent the read")
			assert.Equal(t, crewID, c.ID())
			assert.Equal(t, int64(2), fellBack.Load(), "the database ran the read the replica failed, and its rerun")
		})
	}
}

// poolAndKiller opens a migrated database with a pool of pool connections, and a second
// handle on the same database, of one connection, to end the first one's connections.
func poolAndKiller(t *testing.T, fresh func(testing.TB) testenv.Database, pool int) (db, killer *gormdb.DB) {
	t.Helper()
	database := fresh(t)
	same := func(testing.TB) testenv.Database { return database }
	return openMigrated(t, same, gormdb.Options{MaxOpenConns: pool}), openFresh(t, same, gormdb.Options{MaxOpenConns: 1})
}
