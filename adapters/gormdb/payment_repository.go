package gormdb

import (
	"context"
	"database/sql"
	"time"

	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/ports"
)

var _ ports.StockRepository = (*StockRepository)(nil)

// GetForUpdate reads the order's row with SELECT … FOR UPDATE, locking it until the transaction
// in ctx ends, then its items. The locking read sees the status as committed, also on MySQL,
// where a plain read would return the snapshot the transaction's first plain read took (a
// payment batch locks several orders in turn). Outside TxRunner.InTx it fails.
func (r *OrderRepository) GetForUpdate(ctx context.Context, id string) (*order.Order, error) {
	if _, ok := r.db.transaction(ctx); !ok {
		return nil, errNoTransaction
	}
	return r.read(ctx, errorMeanings{op: "lock order", notFound: order.ErrNotFound}, r.getForUpdateSQL, id)
}

// MarkPaid is one conditional UPDATE (no row updated is order.ErrNotPayable) and the rollup of
// the order's lines into product_sales_hourly, in one transaction (the caller's, when ctx
// carries one), so the rollup always equals the aggregate of the COMPLETED orders.
func (r *OrderRepository) MarkPaid(ctx context.Context, id string, paidAt time.Time) error {
	// The time as stored, so the rollup's hour is the stored payment time's hour.
	paidAt = paidAt.UTC().Truncate(time.Microsecond)
	return r.tx.InTx(ctx, func(ctx context.Context) error {
		updated, err := r.db.exec(ctx, errorMeanings{op: "mark order paid"},
			Bind(r.db.dialect, "UPDATE orders SET status = 'COMPLETED', paid_at = ? WHERE id = ? AND status = 'PENDING'"),
			paidAt, id)
		if err != nil {
			return err
		}
		if updated == 0 {
			return order.ErrNotPayable
		}
		return r.rollUpSales(ctx, id, paidAt)
	})
}

// MarkCancelled is one conditional UPDATE; no row updated is order.ErrNotCancellable.
func (r *OrderRepository) MarkCancelled(ctx context.Context, id string) error {
	updated, err := r.db.exec(ctx, errorMeanings{op: "mark order cancelled"},
		Bind(r.db.dialect, "UPDATE orders SET status = 'CANCELLED' WHERE id = ? AND status = 'PENDING'"), id)
	if err != nil {
		return err
	}
	if updated == 0 {
		return order.ErrNotCancellable
	}
	return nil
}

// rollUpSales adds the lines of the order, COMPLETED at paidAt, to the rows of their products
// and paidAt's UTC hour in one multi-row upsert. The rows go in product id order, so concurrent
// payments lock shared rows in one order and never deadlock on them.
func (r *OrderRepository) rollUpSales(ctx context.Context, orderID string, paidAt time.Time) error {
	hour := paidAt.UTC().Truncate(time.Hour)
	var args []any
	err := r.db.query(ctx, errorMeanings{op: "read sold lines"},
		Bind(r.db.dialect, "SELECT product_id, quantity, subtotal FROM order_items WHERE order_id = ? ORDER BY product_id"),
		[]any{orderID}, func(rows *sql.Rows) error {
			var productID string
			var quantity, subtotal int64
			if err := rows.Scan(&productID, &quantity, &subtotal); err != nil {
				return err
			}
			args = append(args, productID, hour, quantity, subtotal)
			return nil
		})
	if err != nil || len(args) == 0 {
		return err
	}
	_, err = r.db.exec(ctx, errorMeanings{op: "roll up sales"}, Bind(r.db.dialect,
		"INSERT INTO product_sales_hourly (product_id, hour_start, units, revenue) VALUES "+tuples(len(args)/4, 4)+" "+
			SalesRollupUpsert(r.db.dialect)), args...)
	return err
}

// SalesRollupUpsert is the clause that makes an INSERT INTO product_sales_hourly add its units
// and revenue to the row of the product and hour when there is one. The load tool's payment
// ceiling rolls up through it too.
func SalesRollupUpsert(d Dialect) string {
	if d == MySQL {
		return "ON DUPLICATE KEY UPDATE units = units + VALUES(units), revenue = revenue + VALUES(revenue)"
	}
	return "ON CONFLICT (product_id, hour_start) DO UPDATE SET units = product_sales_hourly.units + EXCLUDED.units, " +
		"revenue = product_sales_hourly.revenue + EXCLUDED.revenue"
}

// TopSelling sums the whole hours from since on in product_sales_hourly (index-only on
// product_sales_hourly_by_hour) with the lines of the orders paid in the part of an hour before
// them, read live on orders_by_status_paid_at and order_items_sales, keeps the top limit, then
// joins their names: exactly the aggregate of the COMPLETED orders paid since, at the cost of a
// few rows per product and hour and at most one hour of orders.
func (r *OrderRepository) TopSelling(ctx context.Context, since time.Time, limit int) ([]order.Sales, error) {
	// Payment times are stored to the microsecond: one counts when it is at or after since
	// rounded up to a microsecond, whatever a driver does with the nanoseconds.
	since = since.UTC()
	if rounded := since.Truncate(time.Microsecond); rounded.Before(since) {
		since = rounded.Add(time.Microsecond)
	}
	firstHour := since.Truncate(time.Hour)
	if firstHour.Before(since) {
		firstHour = firstHour.Add(time.Hour)
	}
	bigint := "SIGNED"
	if r.db.dialect == Postgres {
		bigint = "bigint"
	}
	query := Bind(r.db.dialect, "SELECT t.product_id, p.name, t.units, t.revenue FROM ("+
		"SELECT s.product_id, CAST(SUM(s.quantity) AS "+bigint+") AS units, CAST(SUM(s.subtotal) AS "+bigint+") AS revenue FROM ("+
		"SELECT h.product_id, h.units AS quantity, h.revenue AS subtotal FROM product_sales_hourly h WHERE h.hour_start >= ? "+
		"UNION ALL SELECT i.product_id, i.quantity, i.subtotal FROM orders o JOIN order_items i ON i.order_id = o.id "+
		"WHERE o.status = 'COMPLETED' AND o.paid_at >= ? AND o.paid_at < ?"+
		") s GROUP BY s.product_id ORDER BY units DESC, s.product_id LIMIT ?"+
		") t JOIN products p ON p.id = t.product_id ORDER BY t.units DESC, t.product_id")
	var top []order.Sales
	err := r.db.query(ctx, errorMeanings{op: "top selling products"}, query, []any{firstHour, since, firstHour, limit},
		func(rows *sql.Rows) error {
			var s order.Sales
			if err := rows.Scan(&s.ProductID, &s.Name, &s.Units, &s.Revenue); err != nil {
				return err
			}
			top = append(top, s)
			return nil
		})
	return top, err
}

// StockRepository changes the stock table and appends to stock_history; it implements
// ports.StockRepository.
type StockRepository struct {
	db *DB
	// Hand-written statements (see statement.go), bound to db's dialect once.
	deductSQL, movementsSQL string
}

// NewStockRepository returns the stock repository of db.
func NewStockRepository(db *DB) *StockRepository {
	return &StockRepository{
		db: db,
		deductSQL: Bind(db.dialect, "UPDATE stock SET quantity = quantity - ?, version = version + 1 "+
			"WHERE product_id = ? AND version = ? AND quantity >= ?"),
		movementsSQL: Bind(db.dialect, "SELECT id, type, before_quantity, after_quantity, ref_type, ref_id, created_at "+
			"FROM stock_history WHERE product_id = ? ORDER BY created_at, id"),
	}
}

// Deduct is the optimistic UPDATE; no row updated is ports.ErrVersionConflict.
func (r *StockRepository) Deduct(ctx context.Context, productID string, version, n int64) error {
	updated, err := r.db.exec(ctx, errorMeanings{op: "deduct stock"}, r.deductSQL, n, productID, version, n)
	if err != nil {
		return err
	}
	if updated == 0 {
		return ports.ErrVersionConflict
	}
	return nil
}

// AddMovements inserts the history rows in one multi-row INSERT. A call carries at most 8,191
// rows (eight parameters each, and both databases take at most 65,535 per statement).
func (r *StockRepository) AddMovements(ctx context.Context, movements ...catalog.Movement) error {
	if len(movements) == 0 {
		return nil
	}
	query := Bind(r.db.dialect, "INSERT INTO stock_history (id, product_id, type, before_quantity, after_quantity, "+
		"ref_type, ref_id, created_at) VALUES "+tuples(len(movements), 8))
	args := make([]any, 0, 8*len(movements))
	for _, m := range movements {
		args = append(args, m.ID, m.ProductID, string(m.Type), m.Before, m.After, m.RefType, m.RefID, m.CreatedAt.UTC())
	}
	_, err := r.db.exec(ctx, errorMeanings{op: "add stock movements", notFound: catalog.ErrProductNotFound}, query, args...)
	return err
}

// Movements reads the product's history on stock_history_by_product.
func (r *StockRepository) Movements(ctx context.Context, productID string) ([]catalog.Movement, error) {
	var found []catalog.Movement
	err := r.db.query(ctx, errorMeanings{op: "read stock history"}, r.movementsSQL, []any{productID}, func(rows *sql.Rows) error {
		m := catalog.Movement{ProductID: productID}
		var kind string
		if err := rows.Scan(&m.ID, &kind, &m.Before, &m.After, &m.RefType, &m.RefID, &m.CreatedAt); err != nil {
			return err
		}
		m.Type, m.CreatedAt = catalog.MovementType(kind), m.CreatedAt.UTC()
		found = append(found, m)
		return nil
	})
	return found, err
}
