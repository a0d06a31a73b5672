package gormdb_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
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
	"github.com/rushgate/rushgate/domain/commerce/order"
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
	// holds, when set, is handed the picked request, kept from the database, as the client's
	// connection breaks at once: the client gives up while the database still holds the
	// transaction open, until the test releases the request (heldRequest.release).
	holds chan *heldRequest
	// meanwhile, when set, runs once the picked request was answered (or dropped), before the
	// client hears that its connection broke: what another client does in between.
	meanwhile func()
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
	// held is the picked request while the breaker holds it.
	held atomic.Pointer[heldRequest]
	// broke runs the breaker's meanwhile once, at the first read that breaks.
	broke sync.Once
}

func (c *breakingConn) Write(b []byte) (int, error) {
	if c.held.Load() != nil {
		// What the client sends after (its goodbye) stays behind the held request.
		return len(b), nil
	}
	if c.breaker.picks(bytes.ToLower(b)) && c.breaker.disarmOne() {
		c.answering.Store(true)
		if c.breaker.holds != nil {
			held := &heldRequest{conn: c.Conn, request: bytes.Clone(b)}
			c.held.Store(held)
			// A read already waiting (pgx reads ahead) ends now, the connection kept open.
			_ = c.SetReadDeadline(time.Now())
			c.breaker.holds <- held
			return len(b), nil
		}
		if c.breaker.drops {
			// A read already waiting (pgx reads ahead) ends with the connection.
			c.breakNow()
			return len(b), nil
		}
	}
	return c.Conn.Write(b)
}

func (c *breakingConn) Read(b []byte) (int, error) {
	if c.held.Load() != nil {
		return 0, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	n, err := c.Conn.Read(b)
	if c.held.Load() != nil {
		return 0, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	dropped := c.breaker.drops && c.answering.Load()
	if !dropped && (err != nil || !c.answering.Load() || c.passed.Add(1) <= c.breaker.passes) {
		return n, err
	}
	// What came back is the database's word that it did it; the client never sees it.
	c.breakNow()
	return 0, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

// breakNow closes the connection and, the first time, runs the breaker's meanwhile before the
// client hears of it.
func (c *breakingConn) breakNow() {
	_ = c.Close()
	if c.breaker.meanwhile != nil {
		c.broke.Do(c.breaker.meanwhile)
	}
}

func (c *breakingConn) Close() error {
	if c.held.Load() != nil {
		return nil // the held request's release closes the connection
	}
	return c.Conn.Close()
}

// heldRequest is a request the client believes it sent, on a connection it has given up.
type heldRequest struct {
	conn    net.Conn
	request []byte
}

// release sends the request to the database and waits for the first byte of its answer, when
// send, and closes the connection either way: unsent, the database ends the transaction with it.
func (h *heldRequest) release(send bool) error {
	defer h.conn.Close()
	if !send {
		return nil
	}
	if err := h.conn.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		return err
	}
	if _, err := h.conn.Write(h.request); err != nil {
		return err
	}
	_, err := h.conn.Read(make([]byte, 1))
	return err
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

// TestAddToCart_ACommitWhoseAnswerWasLostIsAnsweredByTheCartsRecentAdds breaks a cart add's
// connection during its COMMIT. Once the COMMIT has reached the database (it committed), the add
// is answered as added, from the cart's recent adds read back on another connection, rather than
// a 503 whose retry would add the units a second time; when it never reached it (it did not
// commit), the add answers 503 and its retry adds the units once. So also when another
// instance's add commits on the cart between the COMMIT and the read, and when the lost add was
// creating the cart and the database runs its COMMIT only once the read has started: the read
// waits for the transaction to end (Postgres does not wait for a row not committed yet in a
// locking read, MariaDB does). An add that did not commit leaves at most an empty cart: nothing
// in the cart's answer, and an order of it is refused as empty.
func TestAddToCart_ACommitWhoseAnswerWasLostIsAnsweredByTheCartsRecentAdds(t *testing.T) {
	cases := []struct {
		name string
		// between: another instance adds a unit to the cart between the lost COMMIT and the read.
		between bool
		// creates: the lost add is the cart's first, and its COMMIT is held until the read waits.
		creates bool
	}{{name: "cart exists"}, {name: "another instance adds between", between: true}, {name: "lost add creates the cart", creates: true}}
	for name, fresh := range dialects {
		for _, c := range cases {
			for _, committed := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/committed=%v", name, c.name, committed), func(t *testing.T) {
					t.Parallel()
					ctx := context.Background()
					database := fresh(t)
					same := func(testing.TB) testenv.Database { return database }
					breaker := breakAfterCommit()
					breaker.drops = !committed
					db := openMigrated(t, same, gormdb.WithDial(gormdb.Options{MaxOpenConns: 4}, breaker.dial))
					shop := memorytest.NewShop(t, memorytest.WithStores(gormdb.NewStores(db)))
					// Another instance: its own pool, its own line of adds.
					otherDB := openFresh(t, same, gormdb.Options{MaxOpenConns: 2})
					other := memorytest.NewShop(t, memorytest.WithStores(gormdb.NewStores(otherDB)))
					product := shop.Product(100, 10)
					add := apporder.AddToCartCommand{UserID: "buyer", ProductID: product, Quantity: 2}
					before := 0 // units in the cart before the lost add, the other instance's included
					if !c.creates {
						_, err := shop.Orders.AddToCart(ctx, apporder.AddToCartCommand{UserID: "buyer", ProductID: product, Quantity: 1})
						require.NoError(t, err)
						before++
					}
					if c.between {
						breaker.meanwhile = func() {
							_, err := other.Orders.AddToCart(ctx, apporder.AddToCartCommand{UserID: "buyer", ProductID: product, Quantity: 1})
							assert.NoError(t, err, "the other instance's add")
						}
						before++
					}
					quantity := func() int {
						cart, err := shop.Orders.Cart(ctx, "buyer")
						require.NoError(t, err)
						if len(cart.Items) == 0 {
							return 0
						}
						require.Len(t, cart.Items, 1)
						return cart.Items[0].Quantity
					}

					breaker.armed.Store(1)
					var view apporder.CartItemView
					var err error
					if c.creates {
						breaker.holds = make(chan *heldRequest, 1)
						view, err = answerWhileCommitHeld(t, name, otherDB, breaker.holds, committed, func() (apporder.CartItemView, error) {
							return shop.Orders.AddToCart(ctx, add)
						})
					} else {
						view, err = shop.Orders.AddToCart(ctx, add)
					}

					assert.Zero(t, breaker.armed.Load(), "the COMMIT's answer was lost")
					if !committed {
						require.ErrorIs(t, err, ports.ErrUnavailable, "not committed: answered %+v", view)
						require.ErrorIs(t, err, ports.ErrCommitOutcomeUnknown, "the COMMIT went out as far as the client knows")
						assert.Equal(t, before, quantity(), "nothing added")
						if before == 0 {
							_, err := shop.Orders.Place(ctx, apporder.PlaceCommand{UserID: "buyer"})
							require.ErrorIs(t, err, order.ErrEmptyCart, "an order of the cart the lost add left")
						}
						retried, err := shop.Orders.AddToCart(ctx, add)
						require.NoError(t, err, "the retry")
						assert.Equal(t, before+2, retried.Quantity, "the retry added the units once")
						assert.Equal(t, before+2, quantity())
						return
					}
					require.NoError(t, err, "the add committed")
					assert.Equal(t, 2+min(before, 1), view.Quantity, "the answer is the line's total the add made")
					assert.Equal(t, before+2, quantity(), "the units added once")
				})
			}
		}
	}
}

// answerWhileCommitHeld runs add, whose COMMIT the breaker holds (holds), and releases the
// COMMIT (sent when send, dropped otherwise) once a statement on the database waits on a lock,
// as the read of a lost COMMIT's outcome waits for the transaction, or once add answered
// without waiting. It returns add's answer.
func answerWhileCommitHeld(t *testing.T, name string, watcher *gormdb.DB, holds <-chan *heldRequest, send bool,
	add func() (apporder.CartItemView, error)) (apporder.CartItemView, error) {
	t.Helper()
	type answer struct {
		view apporder.CartItemView
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		view, err := add()
		answered <- answer{view, err}
	}()
	var held *heldRequest
	select {
	case held = <-holds:
	case a := <-answered:
		t.Fatalf("the add answered %+v, %v before its COMMIT went out", a.view, a.err)
	}
	watching, stop := context.WithCancel(context.Background())
	defer stop()
	select {
	case a := <-answered:
		require.NoError(t, held.release(send))
		return a.view, a.err
	case <-lockWaited(watching, t, name, watcher):
	}
	require.NoError(t, held.release(send))
	a := <-answered
	return a.view, a.err
}

// lockWaited is closed once a statement of another connection on db's database waits on a
// lock, looked for every 10ms until ctx ends.
func lockWaited(ctx context.Context, t *testing.T, name string, db *gormdb.DB) <-chan struct{} {
	waits := func() (bool, error) {
		n := 0
		err := gormdb.Query(ctx, db, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
			nil, func(rows *sql.Rows) error { return rows.Scan(&n) })
		return n > 0, err
	}
	if name == "mysql" {
		waits = func() (bool, error) { return innoDBLockWaitIn(ctx, db) }
	}
	seen := make(chan struct{})
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			waiting, err := waits()
			if waiting {
				close(seen)
				return
			}
			if err != nil && ctx.Err() == nil {
				t.Errorf("looking for a lock wait: %v", err)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return seen
}

// innoDBLockWaitIn reports whether a connection on db's database waits on an InnoDB lock, as
// SHOW ENGINE INNODB STATUS lists its transaction ("LOCK WAIT", then its thread id):
// information_schema.innodb_trx is a cache refreshed only once nobody has read it for 0.1 s,
// which pollers in parallel can keep from ever happening.
func innoDBLockWaitIn(ctx context.Context, db *gormdb.DB) (bool, error) {
	ours := map[string]bool{}
	err := gormdb.Query(ctx, db, "SELECT id FROM information_schema.processlist WHERE db = DATABASE()", nil,
		func(rows *sql.Rows) error {
			var id string
			err := rows.Scan(&id)
			ours[id] = true
			return err
		})
	if err != nil {
		return false, err
	}
	var status string
	err = gormdb.Query(ctx, db, "SHOW ENGINE INNODB STATUS", nil, func(rows *sql.Rows) error {
		var engine, file string
		return rows.Scan(&engine, &file, &status)
	})
	if err != nil {
		return false, err
	}
	for _, trx := range strings.Split(status, "---TRANSACTION")[1:] {
		if thread := waitingThread.FindStringSubmatch(trx); thread != nil && ours[thread[1]] {
			return true, nil
		}
	}
	return false, nil
}

// waitingThread finds the thread id of a transaction of InnoDB's status that waits on a lock.
var waitingThread = regexp.MustCompile(`(?s)\nLOCK WAIT .*?thread id (\d+)`)

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
