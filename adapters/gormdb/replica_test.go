package gormdb_test

import (
	"context"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
)

// TestReplica_UnreachableReplicaFallsBackToTheDatabase: with a replica nothing listens for,
// a read marked stale answers from the database and is counted, once per read, including the
// reads made while the replica is skipped; a write made with a marked context goes to the
// database, and unmarked reads never involve the replica.
func TestReplica_UnreachableReplicaFallsBackToTheDatabase(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			database := fresh(t)
			free, err := testenv.FreePorts(1)
			require.NoError(t, err)
			replica, err := url.Parse(database.URL)
			require.NoError(t, err)
			replica.Host = "127.0.0.1:" + strconv.Itoa(free[0])

			var fellBack atomic.Int64
			opts := testenv.DBOptions()
			opts.ReplicaURLs = []string{replica.String()}
			opts.ReplicaFallback = func() { fellBack.Add(1) }
			ctx := context.Background()
			db, err := gormdb.Open(ctx, database.URL, opts)
			require.NoError(t, err, "a replica that is down does not keep the database from opening")
			t.Cleanup(func() { assert.NoError(t, db.Close()) })
			require.NoError(t, gormdb.Migrate(ctx, db))

			crews := gormdb.NewCrewRepository(db)
			stale := ports.AllowStale(ctx)
			c, err := crew.New(uuid.NewString(), "replica", 10, time.Now().UTC())
			require.NoError(t, err)
			require.NoError(t, crews.Create(stale, c), "a write with a marked context goes to the database")
			assert.Zero(t, fellBack.Load(), "a write is never meant for a replica")

			_, err = crews.Get(ctx, c.ID())
			require.NoError(t, err)
			assert.Zero(t, fellBack.Load(), "an unmarked read is never meant for a replica")

			for reads := int64(1); reads <= 3; reads++ {
				got, err := crews.Get(stale, c.ID())
				require.NoError(t, err)
				assert.Equal(t, c.ID(), got.ID())
				members, err := gormdb.NewCrewMemberRepository(db).List(stale, c.ID(), nil, 10)
				require.NoError(t, err)
				assert.Empty(t, members)
				assert.Equal(t, 2*reads, fellBack.Load(), "each marked read is counted once")
			}
		})
	}
}

// TestReplica_OfAnotherDialectIsRefused: a replica must speak the database's dialect, even one
// that answers: a database of TEST_MYSQL_DSN's server, the MySQL the tests are given.
func TestReplica_OfAnotherDialectIsRefused(t *testing.T) {
	replica, err := url.Parse(testenv.MySQL(t).URL)
	require.NoError(t, err)
	opts := testenv.DBOptions()
	opts.ReplicaURLs = []string{replica.String()}
	_, err = gormdb.Open(context.Background(), testenv.Postgres(t).URL, opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "replica at "+replica.Host+" is mysql, the primary postgres")
}
