package gormdb_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/memory/memorytest"
	"github.com/rushgate/rushgate/adapters/system"
	appcrew "github.com/rushgate/rushgate/application/crew"
	"github.com/rushgate/rushgate/application/guard"
	apporder "github.com/rushgate/rushgate/application/order"
	appraffle "github.com/rushgate/rushgate/application/raffle"
	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/domain/draw"
	"github.com/rushgate/rushgate/domain/raffle"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
)

// roundTrips counts the round trips of the connections it dials: each turn from sending to
// receiving is one, however many writes and reads it takes.
type roundTrips struct {
	mu    sync.Mutex
	count int
}

func (r *roundTrips) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: conn, trips: r}, nil
}

func (r *roundTrips) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

type countedConn struct {
	net.Conn
	trips   *roundTrips
	sending bool // guarded by trips.mu
}

func (c *countedConn) Write(b []byte) (int, error) {
	c.trips.mu.Lock()
	c.sending = true
	c.trips.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *countedConn) Read(b []byte) (int, error) {
	c.trips.mu.Lock()
	if c.sending {
		c.sending = false
		c.trips.count++
	}
	c.trips.mu.Unlock()
	return c.Conn.Read(b)
}

// openCounted opens a fresh, migrated database of one connection whose round trips it counts.
func openCounted(t *testing.T, fresh func(testing.TB) testenv.Database) (*gormdb.DB, *roundTrips) {
	t.Helper()
	trips := &roundTrips{}
	return openMigrated(t, fresh, gormdb.WithDial(gormdb.Options{MaxOpenConns: 1}, trips.dial)), trips
}

// joinMarker is the idempotency marker of a join made with key.
func joinMarker(key string) ports.IdempotencyMarker {
	return ports.IdempotencyMarker{Key: ports.IdempotencyKey{Scope: "scope", Key: key}, Fingerprint: "f",
		Response: ports.StoredResponse{Outcome: "created", Body: []byte("{}")}, CreatedAt: time.Now().UTC()}
}

// TestCrewJoin_AnUncontendedJoinCostsFourDatabaseRoundTripsOnPostgresTwoOnMySQL: a join of a
// crew with seats to spare is BEGIN, the crew's row FOR UPDATE, one statement carrying the
// member row, the member count and the idempotency marker, and COMMIT — one fewer than the bare
// join transaction (BEGIN, FOR UPDATE, INSERT, UPDATE, COMMIT); it cost six while each write was
// a statement. On MySQL the BEGIN rides with the FOR UPDATE and the COMMIT with the writes.
func TestCrewJoin_AnUncontendedJoinCostsFourDatabaseRoundTripsOnPostgresTwoOnMySQL(t *testing.T) {
	want := map[string]int{"postgres": 4, "mysql": 2}
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			// One connection, warm after the first join: what is counted is the join alone.
			db, trips := openCounted(t, fresh)
			stores := gormdb.NewStores(db)
			clock := system.Clock{}
			coord := memory.NewCoordination(clock)
			g := guard.New(guard.Deps{Idempotency: coord.Idempotency, Locker: coord.Locker, Clock: clock,
				Sleeper: system.Sleeper{}, Tx: stores.Tx, Markers: stores.Markers}, guard.Config{})
			crews := appcrew.NewService(appcrew.Deps{Tx: stores.Tx, Crews: stores.Crews, Members: stores.CrewMembers,
				Guard: g, Clock: clock, IDs: system.UUIDs{}}, appcrew.Config{})
			join := func() int {
				t.Helper()
				c, err := crews.Create(ctx, appcrew.CreateCommand{Name: "counted", MaxMembers: 10})
				require.NoError(t, err)
				user := "user-" + uuid.NewString()
				before := trips.total()
				res, err := crews.Join(ctx, appcrew.JoinCommand{CrewID: c.ID, UserID: user, IdempotencyKey: "k-" + user})
				require.NoError(t, err)
				require.Equal(t, 1, res.Value.CurrentMembers)
				return trips.total() - before
			}
			join()

			assert.Equal(t, want[name], join(), "database round trips of one join")
		})
	}
}

// TestAddToCart_AnAddCostsSevenDatabaseRoundTripsOnPostgresSixOnMySQL: an add to a cart that
// exists is BEGIN, the statement that records the add on the cart, the cart's row FOR UPDATE,
// its lines, the product, the line's write and COMMIT; on MySQL the BEGIN rides with the first
// statement. Recording the batch's id among the cart's recent adds, which tells whether a COMMIT
// whose answer was lost committed, costs none: that statement ran before, doing nothing on a
// cart that existed.
func TestAddToCart_AnAddCostsSevenDatabaseRoundTripsOnPostgresSixOnMySQL(t *testing.T) {
	want := map[string]int{"postgres": 7, "mysql": 6}
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			// One connection, warm after the first add: what is counted is the add alone.
			db, trips := openCounted(t, fresh)
			shop := memorytest.NewShop(t, memorytest.WithStores(gormdb.NewStores(db)))
			product := shop.Product(100, 10)
			add := func() int {
				t.Helper()
				before := trips.total()
				_, err := shop.Orders.AddToCart(ctx, apporder.AddToCartCommand{UserID: "buyer", ProductID: product, Quantity: 1})
				require.NoError(t, err)
				return trips.total() - before
			}
			add()

			assert.Equal(t, want[name], add(), "database round trips of one add")
		})
	}
}

// seat seats userID in crewID in the transaction ctx carries, the way a join does: the crew
// read FOR UPDATE, then its member row and count, which the transaction holds back until its
// next statement. A refusal held back comes from that statement.
func seat(ctx context.Context, stores ports.Stores, crewID, userID string) error {
	c, err := stores.Crews.GetForUpdate(ctx, crewID)
	if err != nil {
		return err
	}
	m, err := c.Join(userID, time.Now().UTC())
	if err != nil {
		return err
	}
	if err := stores.CrewMembers.Add(ctx, m); err != nil {
		return err
	}
	return stores.Crews.Save(ctx, c)
}

// assertRefusedJoinLeftNothing checks that crewID holds exactly the members seated, by its count
// and its member rows, and that the marker sent with a refused member (key "fresh") was not
// stored.
func assertRefusedJoinLeftNothing(t *testing.T, db *gormdb.DB, stores ports.Stores, crewID string, seated int) {
	t.Helper()
	assert.Equal(t, seated, currentMembers(t, db, crewID), "stored count")
	members, err := stores.CrewMembers.Count(context.Background(), crewID)
	require.NoError(t, err)
	assert.Equal(t, seated, members, "member rows")
	found, err := stores.Markers.Find(context.Background(), []ports.IdempotencyKey{joinMarker("fresh").Key})
	require.NoError(t, err)
	assert.Empty(t, found, "the marker sent with the refused member")
}

// TestWriteBuffer_WritesSentTogetherAnswerTheErrorOfTheOneThatFailed: a join's member row and
// count go out in one statement with the idempotency marker, yet a refusal still names the
// write refused — a marker already stored is ports.ErrMarkerExists, a member already seated
// crew.ErrAlreadyMember — and none of the writes sent with it stays.
func TestWriteBuffer_WritesSentTogetherAnswerTheErrorOfTheOneThatFailed(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := openMigrated(t, fresh, gormdb.Options{})
			stores := gormdb.NewStores(db)
			crewID := insertCrew(t, db)
			seated := "user-" + uuid.NewString()
			// join seats userID and saves a marker for key, the way a guarded join does.
			join := func(userID, key string) error {
				return stores.Tx.InTx(ctx, func(ctx context.Context) error {
					if err := seat(ctx, stores, crewID, userID); err != nil {
						return err
					}
					return stores.Markers.Save(ctx, []ports.IdempotencyMarker{joinMarker(key)})
				})
			}
			require.NoError(t, join(seated, "taken"))

			assert.ErrorIs(t, join("user-"+uuid.NewString(), "taken"), ports.ErrMarkerExists)
			assert.ErrorIs(t, join(seated, "fresh"), crew.ErrAlreadyMember)
			assertRefusedJoinLeftNothing(t, db, stores, crewID, 1)
		})
	}
}

// TestWriteBuffer_ANextLockingReadCarriesTheWritesHeldBack: in one transaction, the writes of
// one crew's join (member row, count, idempotency marker) are held back until the transaction's
// next statement. The next crew's FOR UPDATE carries them, one round trip for both: on MySQL as
// a multi-statement, on Postgres as data-modifying CTEs in front of the read. A refused write is
// answered by that read with the write's own meaning (a marker stored already is
// ports.ErrMarkerExists, a member seated already crew.ErrAlreadyMember), and none of the writes
// sent with it stays.
func TestWriteBuffer_ANextLockingReadCarriesTheWritesHeldBack(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, trips := openCounted(t, fresh)
			stores := gormdb.NewStores(db)
			first, next := insertCrew(t, db), insertCrew(t, db)
			seated := "user-" + uuid.NewString()
			// joinThenLockNext seats userID in the first crew with a marker for key, the way a
			// guarded join does, then reads the next crew FOR UPDATE: the round trips of that read,
			// and its error.
			joinThenLockNext := func(userID, key string) (int, error) {
				var trip int
				err := stores.Tx.InTx(ctx, func(ctx context.Context) error {
					if err := seat(ctx, stores, first, userID); err != nil {
						return err
					}
					require.NoError(t, stores.Markers.Save(ctx, []ports.IdempotencyMarker{joinMarker(key)}))
					before := trips.total()
					_, err := stores.Crews.GetForUpdate(ctx, next)
					trip = trips.total() - before
					return err
				})
				return trip, err
			}

			_, err := joinThenLockNext(seated, "taken")
			require.NoError(t, err)
			// Postgres prepares a statement the connection has not sent before: count the second.
			trip, err := joinThenLockNext("user-"+uuid.NewString(), "second")
			require.NoError(t, err)
			assert.Equal(t, 1, trip, "round trips of the read carrying the writes")
			_, err = joinThenLockNext("user-"+uuid.NewString(), "taken")
			assert.ErrorIs(t, err, ports.ErrMarkerExists)
			_, err = joinThenLockNext(seated, "fresh")
			assert.ErrorIs(t, err, crew.ErrAlreadyMember)

			assertRefusedJoinLeftNothing(t, db, stores, first, 2)
		})
	}
}

// TestWriteBuffer_ALockingReadOfAHeldRowSeesTheWritesHeldBack: a transaction that reads a crew
// FOR UPDATE again after a join's writes were held back reads the count those writes changed.
// On Postgres a statement's own read does not see its data-modifying CTEs, so such a read must
// not carry the writes: they go first.
func TestWriteBuffer_ALockingReadOfAHeldRowSeesTheWritesHeldBack(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := openMigrated(t, fresh, gormdb.Options{})
			stores := gormdb.NewStores(db)
			crewID := insertCrew(t, db)
			var reread int
			err := stores.Tx.InTx(ctx, func(ctx context.Context) error {
				if err := seat(ctx, stores, crewID, "user-"+uuid.NewString()); err != nil {
					return err
				}
				again, err := stores.Crews.GetForUpdate(ctx, crewID)
				if err != nil {
					return err
				}
				reread = again.CurrentMembers()
				return nil
			})
			require.NoError(t, err)
			assert.Equal(t, 1, reread, "the count read again in the transaction")
			assert.Equal(t, 1, currentMembers(t, db, crewID), "stored count")
		})
	}
}

// TestRaffleEntries_ABatchIsOneRoundTripAndTheRaffleIsCheckedOnce: a batch of new entries is one
// statement, which checks the raffle's row once, in share mode, for the whole batch. Entries
// carry no foreign key to their raffle: it checked that row again for every entry (on Postgres
// one trigger query per entry), which the statement's own join to the row already answers.
func TestRaffleEntries_ABatchIsOneRoundTripAndTheRaffleIsCheckedOnce(t *testing.T) {
	const batch = 16
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, trips := openCounted(t, fresh)
			stores := gormdb.NewRaffleStores(db)
			seed, err := draw.RandomSeed()
			require.NoError(t, err)
			now := time.Now().UTC()
			r, err := raffle.New(uuid.NewString(), "counted", 1, now.Add(time.Hour), "", seed, now)
			require.NoError(t, err)
			require.NoError(t, stores.Raffles.Create(ctx, r))
			enter := func(n int) int {
				t.Helper()
				users := make([]string, n)
				for i := range users {
					users[i] = "user-" + uuid.NewString()
				}
				before := trips.total()
				stored, _, err := stores.Entries.AddWhileOpen(ctx, r.ID(), time.Now().UTC(), users)
				require.NoError(t, err)
				require.Len(t, stored, n)
				return trips.total() - before
			}
			enter(1) // warm: the connection is open, the statement prepared

			assert.Equal(t, 1, enter(batch), "database round trips of a batch of %d new entries", batch)
			var foreignKeys int
			schema := map[gormdb.Dialect]string{gormdb.Postgres: "current_schema()", gormdb.MySQL: "DATABASE()"}[db.Dialect()]
			require.NoError(t, db.SQL().QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.table_constraints "+
				"WHERE table_schema = "+schema+" AND table_name = 'raffle_entries' AND constraint_type = 'FOREIGN KEY'").
				Scan(&foreignKeys))
			assert.Zero(t, foreignKeys, "foreign keys checked for each entry")
		})
	}
}

// TestRaffleEnter_ANewEntryIsOneRoundTripARepeatedOneTwo: entering is one statement; entering
// again is that statement, which stores nothing, and one read of the stored entry. MySQL's
// statement, refused for the entered user, reads the entry to run again without them and
// hands what it read to the answer, which read it a second time before (three round trips).
func TestRaffleEnter_ANewEntryIsOneRoundTripARepeatedOneTwo(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, trips := openCounted(t, fresh)
			stores := gormdb.NewRaffleStores(db)
			raffles := appraffle.NewService(appraffle.Deps{Tx: gormdb.NewStores(db).Tx, Raffles: stores.Raffles,
				Entries: stores.Entries, Clock: system.Clock{}, IDs: system.UUIDs{}})
			r, err := raffles.Create(ctx, appraffle.CreateCommand{Name: "counted", Winners: 1, ClosesAt: time.Now().Add(time.Hour)})
			require.NoError(t, err)
			enter := func(user string, wantCreated bool) int {
				t.Helper()
				before := trips.total()
				_, created, err := raffles.Enter(ctx, r.ID, user)
				require.NoError(t, err)
				require.Equal(t, wantCreated, created)
				return trips.total() - before
			}
			warm := "user-" + uuid.NewString()
			enter(warm, true) // the raffle read into the service's cache, the statements prepared
			enter(warm, false)
			user := "user-" + uuid.NewString()

			assert.Equal(t, 1, enter(user, true), "database round trips of a new entry")
			assert.Equal(t, 2, enter(user, false), "database round trips of a repeated entry")
		})
	}
}

// TestInTx_AMySQLTransactionEndsOnItsConnectionWhateverEndsIt: on MySQL a transaction holds a
// pooled connection and sends its own BEGIN, ROLLBACK and COMMIT, so however it ends — committed,
// refused by fn (ROLLBACK), past its deadline between two statements (the connection closed), or
// having sent nothing — the pool (of one connection here) has no transaction open after it, and
// only the committed write stays. A transaction that sent nothing cost no round trip.
func TestInTx_AMySQLTransactionEndsOnItsConnectionWhateverEndsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The committed join's statements must fit in it on a busy runner; the one that waits for
	// its deadline waits this long.
	const txTimeout = 2 * time.Second
	trips := &roundTrips{}
	db := openMigrated(t, testenv.MySQL, gormdb.WithDial(gormdb.Options{MaxOpenConns: 1, TxTimeout: txTimeout}, trips.dial))
	stores := gormdb.NewStores(db)
	crewID := insertCrew(t, db)
	refused := errors.New("refused by fn")
	// join seats a new member the way a join does, then ends as end says.
	join := func(end func(ctx context.Context) error) error {
		return stores.Tx.InTx(ctx, func(ctx context.Context) error {
			if err := seat(ctx, stores, crewID, "user-"+uuid.NewString()); err != nil {
				return err
			}
			// A statement sends the writes held back so far: the transaction has written.
			_, err := stores.CrewMembers.Count(ctx, crewID)
			require.NoError(t, err)
			return end(ctx)
		})
	}
	// inTransaction is whether the pool's connection still has a transaction open.
	inTransaction := func() bool {
		var open int
		require.NoError(t, db.SQL().QueryRowContext(ctx, "SELECT @@in_transaction").Scan(&open))
		return open == 1
	}

	require.NoError(t, join(func(context.Context) error { return nil }))
	assert.False(t, inTransaction(), "after a commit")
	assert.ErrorIs(t, join(func(context.Context) error { return refused }), refused)
	assert.False(t, inTransaction(), "after fn refused")
	err := join(func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	})
	assert.ErrorIs(t, err, ports.ErrUnavailable, "a transaction past its deadline")
	assert.False(t, inTransaction(), "after the deadline passed between two statements")
	assert.Equal(t, 1, currentMembers(t, db, crewID), "only the committed join stays")
	members, err := stores.CrewMembers.Count(ctx, crewID)
	require.NoError(t, err)
	assert.Equal(t, 1, members, "member rows")

	before := trips.total()
	require.NoError(t, stores.Tx.InTx(ctx, func(context.Context) error { return nil }))
	assert.Equal(t, 0, trips.total()-before, "round trips of a transaction that sent nothing")
}
