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

// GetForUpdate locks the order's row with SELECT … FOR UPDATE until the transaction in ctx
// ends, then reads it and its items. Outside TxRunner.InTx it fails.
func (r *OrderRepository) GetForUpdate(ctx context.Context, id string) (*order.Order, error) {
	if _, ok := r.db.transaction(ctx); !ok {
		return nil, errNoTransaction
	}
	locked := false
	err := r.db.query(ctx, errorMeanings{op: "lock order"}, Bind(r.db.dialect, "SELECT id FROM orders WHERE id = ? FOR UPDATE"),
		[]any{id}, func(rows *sql.Rows) error {
			locked = true
			var ignored string
			return rows.Scan(&ignored)
		})
	if err != nil {
		return nil, err
	}
	if !locked {
		return nil, order.ErrNotFound
	}
	return r.Get(ctx, id)
}

// MarkPaid is one conditional UPDATE; no row updated is order.ErrNotPayable.
func (r *OrderRepository) MarkPaid(ctx context.Context, id string, paidAt time.Time) error {
	updated, err := r.db.exec(ctx, errorMeanings{op: "mark order paid"},
		Bind(r.db.dialect, "UPDATE orders SET status = 'COMPLETED', paid_at = ? WHERE id = ? AND status = 'PENDING'"),
		paidAt.UTC(), id)
	if err != nil {
		return err
	}
	if updated == 0 {
		return order.ErrNotPayable
	}
	return nil
}

// TopSelling aggregates the lines of completed orders paid since a time on the indexes
// orders_by_status_paid_at and order_items_sales, keeps the top limit, then joins their names.
func (r *OrderRepository) TopSelling(ctx context.Context, since time.Time, limit int) ([]order.Sales, error) {
	bigint := "SIGNED"
	if r.db.dialect == Postgres {
		bigint = "bigint"
	}
	query := Bind(r.db.dialect, "SELECT t.product_id, p.name, t.units, t.revenue FROM ("+
		"SELECT i.product_id, CAST(SUM(i.quantity) AS "+bigint+") AS units, CAST(SUM(i.subtotal) AS "+bigint+") AS revenue "+
		"FROM orders o JOIN order_items i ON i.order_id = o.id "+
		"WHERE o.status = 'COMPLETED' AND o.paid_at >= ? GROUP BY i.product_id ORDER BY units DESC, i.product_id LIMIT ?"+
		") t JOIN products p ON p.id = t.product_id ORDER BY t.units DESC, t.product_id")
	var top []order.Sales
	err := r.db.query(ctx, errorMeanings{op: "top selling products"}, query, []any{since.UTC(), limit}, func(rows *sql.Rows) error {
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
