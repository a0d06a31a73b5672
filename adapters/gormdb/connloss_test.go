package gormdb_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/ports"
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

// commitBreaker dials connections that, once armed, let the next COMMIT reach the database and
// its answer come back, then break: the transaction committed, but the client sees its
// connection reset during the COMMIT and cannot tell.
type commitBreaker struct{ armed atomic.Bool }

func (b *commitBreaker) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &breakingConn{Conn: conn, breaker: b}, nil
}

type breakingConn struct {
	net.Conn
	breaker *commitBreaker
	// committing is set once a COMMIT went out on this connection while armed. Read checks it
	// when data arrives, not when called: pgx reads ahead, from another goroutine.
	committing atomic.Bool
}

// Write recognises a COMMIT by how the statement ends: Postgres's simple query message
// ("commit" and a NUL), MySQL's COM_QUERY (a multi-statement whose last is COMMIT).
func (c *breakingConn) Write(b []byte) (int, error) {
	text := bytes.ToLower(b)
	if (bytes.HasSuffix(text, []byte("commit\x00")) || bytes.HasSuffix(text, []byte("commit"))) &&
		c.breaker.armed.CompareAndSwap(true, false) {
		c.committing.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *breakingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil || !c.committing.Load() {
		return n, err
	}
	// What came back is the database's word that it committed; the client never sees it.
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
			breaker := &commitBreaker{}
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
