package gormdb_test

import (
	"context"
	"crypto/rand"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/domain/draw"
	"github.com/rushgate/rushgate/domain/raffle"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
)

// slowNetwork delays the answer to each request its connections send by delay, once set: a
// database that has grown slow without stopping.
type slowNetwork struct{ delay atomic.Int64 }

func (s *slowNetwork) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &slowConn{Conn: conn, network: s}, nil
}

type slowConn struct {
	net.Conn
	network *slowNetwork
	// sent: a request went out since the last answer began. Atomic: pgx reads the connection
	// from a background goroutine while another writes.
	sent atomic.Bool
}

func (c *slowConn) Write(b []byte) (int, error) {
	c.sent.Store(true)
	return c.Conn.Write(b)
}

func (c *slowConn) Read(b []byte) (int, error) {
	if c.sent.Swap(false) {
		time.Sleep(time.Duration(c.network.delay.Load()))
	}
	return c.Conn.Read(b)
}

// TestRaffleEntries_MySQLRerunsShareOneTimeout: MySQL's entry statement stores all of a batch or
// none, so a batch with an entered user takes three round trips (the refused run, the read of
// who is entered, the run without them). On a database answering each in 0.3 s, beyond
// TxTimeout (0.6 s) in all, the batch fails as unavailable at TxTimeout, as a transaction
// would, instead of each step taking a TxTimeout of its own and the caller waiting for all.
func TestRaffleEntries_MySQLRerunsShareOneTimeout(t *testing.T) {
	t.Parallel()
	const txTimeout = 600 * time.Millisecond
	ctx := context.Background()
	network := &slowNetwork{}
	db := openMigrated(t, testenv.MySQL, gormdb.WithDial(gormdb.Options{MaxOpenConns: 1, TxTimeout: txTimeout}, network.dial))
	stores := gormdb.NewRaffleStores(db)
	seed, err := draw.NewSeed(rand.Reader)
	require.NoError(t, err)
	r, err := raffle.New(uuid.NewString(), "slow", 1, time.Now().Add(time.Hour), "", seed, time.Now())
	require.NoError(t, err)
	require.NoError(t, stores.Raffles.Create(ctx, r))
	_, _, err = stores.Entries.AddWhileOpen(ctx, r.ID(), time.Now(), []string{"entered"})
	require.NoError(t, err)

	network.delay.Store(int64(txTimeout / 2))
	start := time.Now()
	_, _, err = stores.Entries.AddWhileOpen(ctx, r.ID(), time.Now(), []string{"entered", "new"})
	took := time.Since(start)
	require.ErrorIs(t, err, ports.ErrUnavailable, "a batch whose reruns outlast TxTimeout")
	require.Less(t, took, txTimeout+time.Second, "the batch's wait")
}
