package gormdb_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
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
				db, err := gormdb.Open(ctx, database.URL, testenv.DBOptions())
				require.NoError(t, err)
				t.Cleanup(func() { assert.NoError(t, db.Close()) })
				dbs[i] = db
			}

			errs := make([]error, instances)
			testkit.StartTogether(instances, func(i int) { errs[i] = gormdb.Migrate(ctx, dbs[i]) })

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
// operator can roll a release back one version at a time: the schema (columns and indexes) after
// each Down is the one that version had on the way up, and the latest comes up again.
func TestMigrate_EveryMigrationGoesDownAndUpAgain(t *testing.T) {
	files, err := os.ReadDir("migrations/postgres")
	require.NoError(t, err)
	latest := int64(len(files))
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := openFresh(t, fresh, gormdb.Options{})
			schemaAt := make([][]string, latest+1)
			for version := range latest + 1 {
				require.NoError(t, gormdb.MigrateTo(ctx, db, version))
				schemaAt[version] = schemaOf(t, db, name)
			}
			for version := latest - 1; version >= 0; version-- {
				require.NoError(t, gormdb.MigrateTo(ctx, db, version))
				assert.Equal(t, schemaAt[version], schemaOf(t, db, name), "schema after rolling back to %d", version)
			}
			require.NoError(t, gormdb.Migrate(ctx, db))
			assert.Equal(t, schemaAt[latest], schemaOf(t, db, name), "schema after migrating up again")
		})
	}
}

// schemaSQL lists the current schema's columns with their types and its indexes with their
// columns, one line each, in order; goose's own tables are left out.
var schemaSQL = map[string]string{
	"postgres": "SELECT table_name || '.' || column_name || ' ' || data_type FROM information_schema.columns " +
		"WHERE table_schema = current_schema() AND table_name NOT LIKE 'goose%' UNION ALL " +
		"SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename NOT LIKE 'goose%' ORDER BY 1",
	"mysql": "SELECT CONCAT(table_name, '.', column_name, ' ', column_type) FROM information_schema.columns " +
		"WHERE table_schema = DATABASE() AND table_name NOT LIKE 'goose%' UNION ALL " +
		"SELECT CONCAT(table_name, ' index ', index_name, ' ', seq_in_index, ' ', column_name) FROM information_schema.statistics " +
		"WHERE table_schema = DATABASE() AND table_name NOT LIKE 'goose%' ORDER BY 1",
}

func schemaOf(t *testing.T, db *gormdb.DB, dialect string) []string {
	t.Helper()
	rows, err := db.SQL().QueryContext(context.Background(), schemaSQL[dialect])
	require.NoError(t, err)
	defer rows.Close()
	var schema []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		schema = append(schema, line)
	}
	require.NoError(t, rows.Err())
	return schema
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
