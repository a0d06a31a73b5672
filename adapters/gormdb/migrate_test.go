package gormdb_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/domain/commerce/order"
)

// TestMigrate_ConcurrentInstancesAllSucceed starts several instances on one empty database at
// once, as a rolling deploy does: the migration lock lets one apply the schema and the others
// then find it applied. Running Migrate again changes nothing.
func TestMigrate_ConcurrentInstancesAllSucceed(t *testing.T) {
	const instances = 3
	for name, fresh := range dialects {
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

// TestMigrate_EveryMigrationGoesDownAndUpAgain: each migration's Down undoes its Up, so an
// operator can roll a release back, and the schema then comes up again.
func TestMigrate_EveryMigrationGoesDownAndUpAgain(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := openMigrated(t, fresh, gormdb.Options{})
			require.NoError(t, gormdb.MigrateDownTo(ctx, db, 0))
			var left []string
			rows, err := db.SQL().QueryContext(ctx, tableNamesSQL[name])
			require.NoError(t, err)
			for rows.Next() {
				var table string
				require.NoError(t, rows.Scan(&table))
				left = append(left, table)
			}
			require.NoError(t, rows.Err())
			require.NoError(t, rows.Close())
			assert.Equal(t, goosesTables[name], left, "only goose's own tables are left")
			require.NoError(t, gormdb.Migrate(ctx, db))
		})
	}
}

// tableNamesSQL lists the tables of the current database or schema by name.
var tableNamesSQL = map[string]string{
	"postgres": "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name",
	"mysql":    "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY table_name",
}

// goosesTables are the migration tool's: its version table, and on MySQL its lock table.
var goosesTables = map[string][]string{
	"postgres": {"goose_db_version"},
	"mysql":    {"goose_db_version", "goose_lock"},
}

// TestMigrate_RollsUpTheSalesAnUpgradedDatabaseHolds: a database at version 7 holding COMPLETED
// and PENDING orders gets, from migration 8, the hourly rollup of exactly its COMPLETED lines,
// and the ranking read on it is the live aggregate.
func TestMigrate_RollsUpTheSalesAnUpgradedDatabaseHolds(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := openFresh(t, fresh, gormdb.Options{})
			require.NoError(t, gormdb.MigrateTo(ctx, db, 7))

			hour := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
			exec := func(query string, args ...any) {
				t.Helper()
				require.NoError(t, gormdb.Exec(ctx, db, query, args...))
			}
			exec("INSERT INTO products (id, name, price, created_at) VALUES ('pa', 'A', 10, ?), ('pb', 'B', 7, ?)", hour, hour)
			type line struct {
				product  string
				quantity int64
			}
			for id, o := range map[string]struct {
				paidAt *time.Time
				lines  []line
			}{
				"o1": {new(hour.Add(15*time.Minute + 500*time.Millisecond)), []line{{"pa", 2}, {"pb", 1}}},
				"o2": {new(hour.Add(time.Hour - time.Microsecond)), []line{{"pa", 3}}},
				"o3": {new(hour.Add(time.Hour)), []line{{"pb", 4}}},
				"o4": {nil, []line{{"pa", 100}}},
			} {
				status := "PENDING"
				if o.paidAt != nil {
					status = "COMPLETED"
				}
				exec("INSERT INTO orders (id, user_id, subtotal_amount, discount_amount, total_amount, status, created_at, paid_at) "+
					"VALUES (?, 'u', 0, 0, 0, ?, ?, ?)", id, status, hour, o.paidAt)
				for n, l := range o.lines {
					price := map[string]int64{"pa": 10, "pb": 7}[l.product]
					exec("INSERT INTO order_items (order_id, line, product_id, name, quantity, unit_price, subtotal) "+
						"VALUES (?, ?, ?, 'x', ?, ?, ?)", id, n, l.product, l.quantity, price, price*l.quantity)
				}
			}
			require.NoError(t, gormdb.Migrate(ctx, db))

			type rolled struct {
				product        string
				hour           time.Time
				units, revenue int64
			}
			var got []rolled
			rows, err := db.SQL().QueryContext(ctx, "SELECT product_id, hour_start, units, revenue FROM product_sales_hourly ORDER BY product_id, hour_start")
			require.NoError(t, err)
			for rows.Next() {
				var r rolled
				require.NoError(t, rows.Scan(&r.product, &r.hour, &r.units, &r.revenue))
				r.hour = r.hour.UTC()
				got = append(got, r)
			}
			require.NoError(t, rows.Err())
			assert.Equal(t, []rolled{{"pa", hour, 5, 50}, {"pb", hour, 1, 7}, {"pb", hour.Add(time.Hour), 4, 28}}, got)

			top, err := gormdb.NewOrderRepository(db).TopSelling(ctx, hour.Add(30*time.Minute), 5)
			require.NoError(t, err)
			assert.Equal(t, []order.Sales{{ProductID: "pb", Name: "B", Units: 4, Revenue: 28}, {ProductID: "pa", Name: "A", Units: 3, Revenue: 30}}, top)
		})
	}
}
