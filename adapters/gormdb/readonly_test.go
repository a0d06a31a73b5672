package gormdb_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
)

// makePoolReadOnly opens all of db's connections, size of them, and makes each refuse writes
// with the server's own read-only error, as every connection to a server that has become
// read-only does (a hot standby, a demoted primary, a MySQL server set read_only); connections
// opened afterwards write, as those to the primary that failover brings up.
func makePoolReadOnly(t *testing.T, db *gormdb.DB, size int) {
	t.Helper()
	ctx := context.Background()
	readOnly := "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"
	if db.Dialect() == gormdb.MySQL {
		readOnly = "SET SESSION TRANSACTION READ ONLY"
	}
	conns := make([]*sql.Conn, size)
	for i := range conns {
		conn, err := db.SQL().Conn(ctx)
		require.NoError(t, err)
		_, err = conn.ExecContext(ctx, readOnly)
		require.NoError(t, err)
		conns[i] = conn
	}
	for _, conn := range conns {
		require.NoError(t, conn.Close()) // back to the pool, idle
	}
}

// TestReadOnlyServer_AWriteAnswersUnavailableAndItsConnectionIsNotPooledAgain: on Postgres and
// MySQL, a write refused because its connection is read-only - a lone insert, and a transaction's
// locking read and update - answers an error wrapping ports.ErrUnavailable, and the pool drops
// that connection: once each pooled connection has refused one write, the next writes run on
// new connections, which write.
func TestReadOnlyServer_AWriteAnswersUnavailableAndItsConnectionIsNotPooledAgain(t *testing.T) {
	const poolSize = 2
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := openMigrated(t, fresh, gormdb.Options{MaxOpenConns: poolSize})
			crewID := insertCrew(t, db)
			makePoolReadOnly(t, db, poolSize)
			ctx := context.Background()
			create := func() error {
				c, err := crew.New(uuid.NewString(), "read-only", 10, time.Now().UTC())
				require.NoError(t, err)
				return gormdb.NewCrewRepository(db).Create(ctx, c)
			}
			update := func() error {
				return gormdb.NewTxRunner(db).InTx(ctx, func(ctx context.Context) error {
					if _, err := gormdb.NewCrewRepository(db).GetForUpdate(ctx, crewID); err != nil {
						return err
					}
					return gormdb.Exec(ctx, db, "UPDATE crews SET current_members = current_members + 1 WHERE id = ?", crewID)
				})
			}

			// One refused write for each read-only connection pooled, each naming its cause for the
			// server's error log (the map's writes run in the order written).
			for what, err := range map[string]error{"a lone write": create(), "a transaction": update()} {
				require.ErrorIs(t, err, ports.ErrUnavailable, what+" on a read-only connection")
				require.ErrorIs(t, err, gormdb.ErrReadOnly, what+" on a read-only connection")
			}

			assert.NoError(t, create(), "a lone write after the read-only connections were dropped")
			assert.NoError(t, update(), "a transaction after the read-only connections were dropped")
			assert.Equal(t, 1, currentMembers(t, db, crewID), "the transaction that succeeded wrote once")
		})
	}
}
