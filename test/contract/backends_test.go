package contract_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
)

// contractTxTimeout is roomy so that 50 transactions queued on one row lock under -race finish
// in time; the timeout tests set their own.
const contractTxTimeout = 30 * time.Second

// crewStore is one backend's implementation of the crew ports.
type crewStore struct {
	tx      ports.TxRunner
	crews   ports.CrewRepository
	members ports.CrewMemberRepository
}

// backend opens the implementation P of a port for one suite. Implementations may share
// storage between suites, so cases isolate themselves with random ids and keys.
type backend[P any] struct {
	name string
	open func(t *testing.T) P
}

// contractCase is one sentence of a port's contract, checked on an implementation P.
type contractCase[P any] struct {
	name string
	run  func(t *testing.T, impl P)
}

// runContract runs every case on every backend, all in parallel.
func runContract[P any](t *testing.T, backends []backend[P], cases []contractCase[P]) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			impl := b.open(t)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, impl)
				})
			}
		})
	}
}

// crewBackends lists every implementation of the crew ports the suites run against.
var crewBackends = []backend[crewStore]{
	{name: "memory", open: func(*testing.T) crewStore {
		d := memory.NewDatabase()
		return crewStore{tx: d, crews: memory.NewCrewRepository(d), members: memory.NewCrewMemberRepository(d)}
	}},
	{name: "postgres", open: func(t *testing.T) crewStore {
		return sqlCrewStore(openSQL(t, testenv.Postgres(t), gormdb.Options{TxTimeout: contractTxTimeout}))
	}},
	{name: "mysql", open: func(t *testing.T) crewStore {
		return sqlCrewStore(openSQL(t, testenv.MySQL(t), gormdb.Options{TxTimeout: contractTxTimeout}))
	}},
}

// sqlServers names the real databases, for tests of what only they can do (time out).
var sqlServers = []struct {
	name  string
	fresh func(t testing.TB) testenv.Database
}{
	{name: "postgres", fresh: testenv.Postgres},
	{name: "mysql", fresh: testenv.MySQL},
}

func sqlCrewStore(db *gormdb.DB) crewStore {
	return crewStore{
		tx:      gormdb.NewTxRunner(db),
		crews:   gormdb.NewCrewRepository(db),
		members: gormdb.NewCrewMemberRepository(db),
	}
}

// openSQL opens and migrates database d, closing it when the test ends.
func openSQL(t *testing.T, d testenv.Database, opts gormdb.Options) *gormdb.DB {
	t.Helper()
	ctx := context.Background()
	db, err := gormdb.Open(ctx, d.URL, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	require.NoError(t, gormdb.Migrate(ctx, db))
	return db
}

// now is a timestamp as ports.Clock gives it: UTC, microsecond precision.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// createCrew stores a new empty crew with a random id and the given capacity.
func createCrew(t *testing.T, s crewStore, maxMembers int) *crew.Crew {
	t.Helper()
	c, err := crew.New(newCrewID(), "contract crew", maxMembers, now())
	require.NoError(t, err)
	require.NoError(t, s.crews.Create(context.Background(), c))
	return c
}

// newCrewID returns a random crew id.
func newCrewID() string { return uuid.NewString() }

// newUserID returns a random user id.
func newUserID() string { return "user-" + uuid.NewString() }
