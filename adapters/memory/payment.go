package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/ports"
)

var _ ports.StockRepository = (*StockRepository)(nil)

// movementKey is a stock history row's primary key, with its product for partitioning.
type movementKey struct {
	productID, id string
}

func movementKeyOf(m catalog.Movement) movementKey { return movementKey{m.ProductID, m.ID} }

var movementsTable = declarePartitionedTable("stock_history", movementKeyOf, movementKey.product)

// product partitions the stock history by product, for Movements.
func (k movementKey) product() string { return k.productID }

// GetForUpdate locks the order's row until ctx's transaction ends, then returns a copy of it or
// order.ErrNotFound. It fails outside InTx.
func (r *OrderRepository) GetForUpdate(ctx context.Context, id string) (*order.Order, error) {
	var found order.Order
	err := r.db.runInTx(ctx, func(t *tx) error {
		o, ok, err := ordersTable.in(r.db).getForUpdate(ctx, t, id)
		if err != nil {
			return err
		}
		if !ok {
			return order.ErrNotFound
		}
		found = cloneOrder(&o)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &found, nil
}

// MarkPaid turns the PENDING order COMPLETED under its row lock, or returns order.ErrNotPayable.
func (r *OrderRepository) MarkPaid(ctx context.Context, id string, paidAt time.Time) error {
	return r.db.run(ctx, func(t *tx) error {
		o, ok, err := ordersTable.in(r.db).getForUpdate(ctx, t, id)
		if err != nil {
			return err
		}
		if !ok {
			return order.ErrNotPayable
		}
		paid := cloneOrder(&o)
		if err := paid.Pay(paidAt); err != nil {
			return err
		}
		return ordersTable.in(r.db).put(ctx, t, paid)
	})
}

// TopSelling scans the orders, as a query without an index would.
func (r *OrderRepository) TopSelling(ctx context.Context, since time.Time, limit int) ([]order.Sales, error) {
	byProduct := make(map[string]*order.Sales)
	err := r.db.run(ctx, func(t *tx) error {
		paid := ordersTable.in(r.db).filter(t, func(o order.Order) bool {
			return o.Status() == order.StatusCompleted && !o.PaidAt().Before(since)
		})
		for _, o := range paid {
			for _, item := range o.Items() {
				s := byProduct[item.ProductID]
				if s == nil {
					product, _ := productsTable.in(r.db).get(t, item.ProductID)
					s = &order.Sales{ProductID: item.ProductID, Name: product.Name()}
					byProduct[item.ProductID] = s
				}
				s.Units += int64(item.Quantity)
				s.Revenue += item.Subtotal
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	top := make([]order.Sales, 0, len(byProduct))
	for _, s := range byProduct {
		top = append(top, *s)
	}
	slices.SortFunc(top, func(a, b order.Sales) int {
		return cmp.Or(cmp.Compare(b.Units, a.Units), cmp.Compare(a.ProductID, b.ProductID))
	})
	return top[:min(limit, len(top))], nil
}

// StockRepository changes stock and keeps its history in a Database.
type StockRepository struct {
	db *Database
}

// NewStockRepository returns a StockRepository on d.
func NewStockRepository(d *Database) *StockRepository { return &StockRepository{db: d} }

// Deduct is the optimistic UPDATE: under the stock row's lock (an UPDATE takes it) it takes n
// units and bumps the version when the version still matches and the stock covers n, and
// otherwise returns ports.ErrVersionConflict.
func (r *StockRepository) Deduct(ctx context.Context, productID string, version, n int64) error {
	return r.db.run(ctx, func(t *tx) error {
		s, ok, err := stockTable.in(r.db).getForUpdate(ctx, t, productID)
		if err != nil {
			return err
		}
		if !ok || s.Version() != version || !s.Covers(n) {
			return ports.ErrVersionConflict
		}
		return stockTable.in(r.db).put(ctx, t, catalog.RebuildStock(productID, s.Quantity()-n, s.Version()+1))
	})
}

// AddMovements inserts history rows in one statement; a row of an unknown product violates the
// foreign key: catalog.ErrProductNotFound.
func (r *StockRepository) AddMovements(ctx context.Context, movements ...catalog.Movement) error {
	if len(movements) == 0 {
		return nil
	}
	return r.db.run(ctx, func(t *tx) error {
		for _, m := range movements {
			if _, ok := productsTable.in(r.db).get(t, m.ProductID); !ok {
				return fmt.Errorf("memory: add stock movement: foreign key product %q: %w", m.ProductID, catalog.ErrProductNotFound)
			}
		}
		return movementsTable.in(r.db).insert(ctx, t, movements...)
	})
}

// Movements returns the product's history ordered by (CreatedAt, ID).
func (r *StockRepository) Movements(ctx context.Context, productID string) ([]catalog.Movement, error) {
	var found []catalog.Movement
	err := r.db.run(ctx, func(t *tx) error {
		found = movementsTable.in(r.db).rowsIn(t, productID)
		return nil
	})
	slices.SortFunc(found, func(a, b catalog.Movement) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return found, err
}
