package gormdb_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/ports"
)

// TestCommerceSchema_RefusesWhatTheDomainNeverWrites: the database is the last line of defence,
// so negative stock, a cart line of no units, negative prices and order amounts that do not add
// up are refused by CHECK constraints, and what was stored stays.
func TestCommerceSchema_RefusesWhatTheDomainNeverWrites(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := openMigrated(t, fresh, gormdb.Options{})
			products, carts := gormdb.NewProductRepository(db), gormdb.NewCartRepository(db)
			now := time.Now().UTC().Truncate(time.Microsecond)
			p, err := catalog.NewProduct(rand.Text(), "guarded", 100, now)
			require.NoError(t, err)
			stock, err := catalog.NewStock(p.ID(), 5)
			require.NoError(t, err)
			require.NoError(t, products.Create(ctx, p, stock))
			fresh, err := order.NewCart(rand.Text(), "u1", now)
			require.NoError(t, err)
			var cart order.Cart
			require.NoError(t, gormdb.NewTxRunner(db).InTx(ctx, func(ctx context.Context) error {
				cart, err = carts.GetOrCreateForUpdate(ctx, fresh, rand.Text())
				return err
			}))

			refused := map[string][]any{
				"negative stock": {"UPDATE stock SET quantity = -1 WHERE product_id = ?", p.ID()},
				"negative price": {"UPDATE products SET price = -1 WHERE id = ?", p.ID()},
				"a line of no units": {"INSERT INTO cart_items (id, cart_id, product_id, quantity, added_at) VALUES (?, ?, ?, 0, ?)",
					rand.Text(), cart.ID(), p.ID(), now},
				"a total that is not subtotal − discount": {"INSERT INTO orders (id, user_id, subtotal_amount, discount_amount, " +
					"total_amount, status, created_at) VALUES (?, 'u1', 100, 10, 100, 'PENDING', ?)", rand.Text(), now},
				"a discount above the subtotal": {"INSERT INTO orders (id, user_id, subtotal_amount, discount_amount, " +
					"total_amount, status, created_at) VALUES (?, 'u1', 100, 101, -1, 'PENDING', ?)", rand.Text(), now},
				"a paid PENDING order": {"INSERT INTO orders (id, user_id, subtotal_amount, discount_amount, " +
					"total_amount, status, created_at, paid_at) VALUES (?, 'u1', 1, 0, 1, 'PENDING', ?, ?)", rand.Text(), now, now},
				"a stock history OUT that raises the stock": {"INSERT INTO stock_history (id, product_id, type, before_quantity, " +
					"after_quantity, ref_type, ref_id, created_at) VALUES (?, ?, 'OUT', 5, 6, 'ORDER', 'o1', ?)", rand.Text(), p.ID(), now},
			}
			for what, statement := range refused {
				err := gormdb.Exec(ctx, db, gormdb.Bind(db.Dialect(), statement[0].(string)), statement[1:]...)
				assert.ErrorIs(t, err, gormdb.ErrCheckViolation, what)
			}
			got, gotStock, err := products.Get(ctx, p.ID())
			require.NoError(t, err)
			assert.Equal(t, int64(100), got.Price())
			assert.Equal(t, int64(5), gotStock.Quantity())
			lines, err := carts.Lines(ctx, "u1")
			require.NoError(t, err)
			assert.Empty(t, lines)
		})
	}
}

// TestOrderGet_ASlowDatabaseCostsOneTxTimeout: an order is its row and its items, two
// statements; outside a transaction the read is bounded by one TxTimeout, as a transaction is,
// so a database answering each round trip in 0.75 TxTimeout fails it (503), where a timeout per
// statement would answer, each statement 0.3 s within its own. The round trips are a lower
// bound, which a busy runner only lengthens: the second ends 0.6 s after the read's deadline,
// which has cut it by then. A round trip stays under a second, after which pgx pings a
// connection before reusing it, one round trip more within the second statement's timeout.
func TestOrderGet_ASlowDatabaseCostsOneTxTimeout(t *testing.T) {
	const txTimeout = 1200 * time.Millisecond
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

			network.delay.Store(int64(txTimeout * 3 / 4))
			start := time.Now()
			_, err = stores.Orders.Get(ctx, o.ID())
			took := time.Since(start)

			require.ErrorIs(t, err, ports.ErrUnavailable, "a read answered after %v", took)
			// The read ends with its second round trip, 1.5 TxTimeout in; a read run again on a
			// timeout of its own would take twice that.
			assert.Less(t, took, 3*txTimeout, "an order read outside a transaction, failing")
		})
	}
}
