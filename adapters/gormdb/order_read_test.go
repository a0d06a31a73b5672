package gormdb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/ports"
)

// TestOrderGet_ASlowDatabaseCostsOneTxTimeout: an order is its row and its items, two
// statements; outside a transaction the read is bounded by one TxTimeout, as a transaction is,
// so a database answering each round trip in 0.6 TxTimeout fails it at TxTimeout (503), not
// after two timeouts' worth of round trips.
func TestOrderGet_ASlowDatabaseCostsOneTxTimeout(t *testing.T) {
	const txTimeout = 800 * time.Millisecond
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			network := &slowNetwork{}
			db := openMigrated(t, fresh, gormdb.WithDial(gormdb.Options{MaxOpenConns: 1, TxTimeout: txTimeout}, network.dial))
			stores := gormdb.NewStores(db)
			now := time.Now().UTC()
			p, err := catalog.NewProduct("01a24de0-0000-7000-8000-000000000001", "slow", 100, now)
			require.NoError(t, err)
			stock, err := catalog.NewStock(p.ID(), 10)
			require.NoError(t, err)
			require.NoError(t, stores.Products.Create(ctx, p, stock))
			o, err := order.Place("01a24de0-0000-7000-8000-000000000002", "buyer", []order.CartLine{{
				CartItem: order.RebuildCartItem("01a24de0-0000-7000-8000-000000000003", "01a24de0-0000-7000-8000-000000000004", p.ID(), 1, now),
				Name:     p.Name(), UnitPrice: p.Price(), Stock: 10}}, order.Discount{}, now)
			require.NoError(t, err)
			require.NoError(t, stores.Orders.Create(ctx, o))
			// Warm: the connection is open and its statements prepared, so what is timed below
			// is the read's own round trips, at least one per statement.
			_, err = stores.Orders.Get(ctx, o.ID())
			require.NoError(t, err)

			network.delay.Store(int64(txTimeout * 6 / 10))
			start := time.Now()
			_, err = stores.Orders.Get(ctx, o.ID())
			took := time.Since(start)

			require.ErrorIs(t, err, ports.ErrUnavailable, "a read answered after %v", took)
			assert.Less(t, took, txTimeout+txTimeout/4, "an order read outside a transaction took more than one TxTimeout")
		})
	}
}
