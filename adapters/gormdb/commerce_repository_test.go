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
				cart, err = carts.GetOrCreateForUpdate(ctx, fresh)
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
