package gormdb_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/test/testenv"
)

// TestMigrate_ConcurrentInstancesAllSucceed starts several instances on one empty database at
// once, as a rolling deploy does: the migration lock lets one apply the schema and the others
// then find it applied. Running Migrate again changes nothing.
func TestMigrate_ConcurrentInstancesAllSucceed(t *testing.T) {
	const instances = 3
	for name, fresh := range map[string]func(testing.TB) testenv.Database{
		"postgres": testenv.Postgres,
		"mysql":    testenv.MySQL,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			database := fresh(t)
			dbs := make([]*gormdb.DB, instances)
			for i := range dbs {
				db, err := gormdb.Open(ctx, database.URL, gormdb.Options{})
				require.NoError(t, err)
				t.Cleanup(func() { assert.NoError(t, db.Close()) })
				dbs[i] = db
			}

			errs := make([]error, instances)
			var wg sync.WaitGroup
			for i, db := range dbs {
				wg.Go(func() { errs[i] = gormdb.Migrate(ctx, db) })
			}
			wg.Wait()

			for _, err := range errs {
				assert.NoError(t, err)
			}
			require.NoError(t, gormdb.Migrate(ctx, dbs[0]))
			for _, table := range []string{"crews", "crew_members", "idempotency_markers"} {
				var rows int
				require.NoError(t, dbs[0].SQL().QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&rows))
				assert.Zero(t, rows, table)
			}
		})
	}
}
