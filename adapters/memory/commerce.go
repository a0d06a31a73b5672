package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.ProductRepository = (*ProductRepository)(nil)
	_ ports.CartRepository    = (*CartRepository)(nil)
	_ ports.OrderRepository   = (*OrderRepository)(nil)
)

func productKeyOf(p catalog.Product) string { return p.ID() }

var productsTable = declareTable("products", productKeyOf)

func stockKeyOf(s catalog.Stock) string { return s.ProductID() }

var stockTable = declareTable("stock", stockKeyOf)

// cartRow is a stored cart and the ids of the latest adds recorded on it, newest first,
// ports.RecentCartAdds at most.
type cartRow struct {
	cart         order.Cart
	recentAddIDs []string
}

// cartKeyOf keys carts by their user: the UNIQUE(user_id) a user's first adds race on.
func cartKeyOf(c cartRow) string { return c.cart.UserID() }

var cartsTable = declareTable("carts", cartKeyOf)

// cartItemKey is the unique key (cartId, productId) of a cart line.
type cartItemKey struct {
	cartID, productID string
}

func cartItemKeyOf(i order.CartItem) cartItemKey { return cartItemKey{i.CartID(), i.ProductID()} }

var cartItemsTable = declarePartitionedTable("cart_items", cartItemKeyOf, cartItemKey.cart)

// cart partitions the cart items table by cart, for Lines and Clear.
func (k cartItemKey) cart() string { return k.cartID }

func orderKeyOf(o order.Order) string { return o.ID() }

var ordersTable = declareTable("orders", orderKeyOf)

// userOrderKey is a row of the index of orders by user: what a query for one user's orders
// reads instead of the whole orders table.
type userOrderKey struct {
	userID, orderID string
}

func userOrderKeyOf(k userOrderKey) userOrderKey { return k }

// user partitions the index by user, for UnitsOrdered.
func (k userOrderKey) user() string { return k.userID }

var userOrdersTable = declarePartitionedTable("orders_by_user", userOrderKeyOf, userOrderKey.user)

// cloneOrder copies o's items, so that neither the caller nor the store can change the other's.
func cloneOrder(o *order.Order) order.Order {
	return *order.Rebuild(o.ID(), o.UserID(), o.CouponID(), o.Items(), o.Subtotal(), o.Discount(), o.Total(),
		o.Status(), o.CreatedAt(), o.PaidAt())
}

// ProductRepository stores products and their stock in a Database.
type ProductRepository struct {
	db *Database
}

// NewProductRepository returns a ProductRepository on d.
func NewProductRepository(d *Database) *ProductRepository { return &ProductRepository{db: d} }

// Create inserts the product and its stock row in one statement, all or none.
func (r *ProductRepository) Create(ctx context.Context, p *catalog.Product, s catalog.Stock) error {
	return r.db.run(ctx, func(t *tx) error {
		if err := productsTable.in(r.db).insert(ctx, t, *p); err != nil {
			return err
		}
		return stockTable.in(r.db).insert(ctx, t, s)
	})
}

// Get returns a copy of the product and its stock, or catalog.ErrProductNotFound.
func (r *ProductRepository) Get(ctx context.Context, id string) (*catalog.Product, catalog.Stock, error) {
	var (
		product catalog.Product
		stock   catalog.Stock
	)
	err := r.db.run(ctx, func(t *tx) error {
		var ok bool
		if product, ok = productsTable.in(r.db).get(t, id); !ok {
			return catalog.ErrProductNotFound
		}
		stock, _ = stockTable.in(r.db).get(t, id)
		return nil
	})
	if err != nil {
		return nil, catalog.Stock{}, err
	}
	return &product, stock, nil
}

// CartRepository stores carts and their items in a Database.
type CartRepository struct {
	db *Database
}

// NewCartRepository returns a CartRepository on d.
func NewCartRepository(d *Database) *CartRepository { return &CartRepository{db: d} }

// GetOrCreateForUpdate locks the user's cart key, creating the cart when there is none, and
// records addID in front of its recent adds. The key is locked before the read, so a concurrent
// first call waits and then finds the cart this one created. It fails outside InTx.
func (r *CartRepository) GetOrCreateForUpdate(ctx context.Context, fresh order.Cart, addID string) (order.Cart, error) {
	var cart order.Cart
	err := r.db.runInTx(ctx, func(t *tx) error {
		found, ok, err := cartsTable.in(r.db).getForUpdate(ctx, t, fresh.UserID())
		if err != nil {
			return err
		}
		cart = fresh
		if ok {
			cart = found.cart
		}
		// A new slice: the row stored before stays as it was, for a rollback.
		recent := append([]string{addID}, found.recentAddIDs[:min(len(found.recentAddIDs), ports.RecentCartAdds-1)]...)
		return cartsTable.in(r.db).put(ctx, t, cartRow{cart: cart, recentAddIDs: recent})
	})
	return cart, err
}

// AddCommitted reads the user's cart under its key lock, which a lone statement releases at
// once: it waits for a transaction that holds the key, creating the cart or not, then reads the
// cart as committed. It creates no cart.
func (r *CartRepository) AddCommitted(ctx context.Context, fresh order.Cart, addID string) (bool, error) {
	var committed bool
	err := r.db.run(ctx, func(t *tx) error {
		row, _, err := cartsTable.in(r.db).getForUpdate(ctx, t, fresh.UserID())
		committed = slices.Contains(row.recentAddIDs, addID)
		return err
	})
	return committed, err
}

// GetForUpdate locks the user's cart key and returns the cart, if there is one. It fails
// outside InTx.
func (r *CartRepository) GetForUpdate(ctx context.Context, userID string) (order.Cart, bool, error) {
	var (
		cart  order.Cart
		found bool
	)
	err := r.db.runInTx(ctx, func(t *tx) error {
		var err error
		var row cartRow
		row, found, err = cartsTable.in(r.db).getForUpdate(ctx, t, userID)
		cart = row.cart
		return err
	})
	return cart, found, err
}

// Lines returns the user's cart items with their products, ordered by (AddedAt, ID).
func (r *CartRepository) Lines(ctx context.Context, userID string) ([]order.CartLine, error) {
	var lines []order.CartLine
	err := r.db.run(ctx, func(t *tx) error {
		row, ok := cartsTable.in(r.db).get(t, userID)
		cart := row.cart
		if !ok {
			return nil
		}
		for _, item := range cartItemsTable.in(r.db).rowsIn(t, cart.ID()) {
			product, _ := productsTable.in(r.db).get(t, item.ProductID())
			stock, _ := stockTable.in(r.db).get(t, item.ProductID())
			lines = append(lines, order.CartLine{CartItem: item, Name: product.Name(), UnitPrice: product.Price(), Stock: stock.Quantity()})
		}
		return nil
	})
	slices.SortFunc(lines, func(a, b order.CartLine) int {
		return cmp.Or(a.AddedAt().Compare(b.AddedAt()), cmp.Compare(a.ID(), b.ID()))
	})
	return lines, err
}

// PutItem inserts the item, or sets the quantity of the cart's line of its product, under the
// line's key lock. An unknown product violates the foreign key: catalog.ErrProductNotFound.
func (r *CartRepository) PutItem(ctx context.Context, item order.CartItem) error {
	return r.db.run(ctx, func(t *tx) error {
		if _, ok := productsTable.in(r.db).get(t, item.ProductID()); !ok {
			return fmt.Errorf("memory: put cart item: foreign key product %q: %w", item.ProductID(), catalog.ErrProductNotFound)
		}
		existing, ok, err := cartItemsTable.in(r.db).getForUpdate(ctx, t, cartItemKeyOf(item))
		if err != nil {
			return err
		}
		if ok {
			item = order.RebuildCartItem(existing.ID(), existing.CartID(), existing.ProductID(), item.Quantity(), existing.AddedAt())
		}
		return cartItemsTable.in(r.db).put(ctx, t, item)
	})
}

// Clear deletes every item of the cart, locking each.
func (r *CartRepository) Clear(ctx context.Context, cartID string) error {
	return r.db.run(ctx, func(t *tx) error {
		for _, item := range cartItemsTable.in(r.db).rowsIn(t, cartID) {
			if _, err := cartItemsTable.in(r.db).delete(ctx, t, cartItemKeyOf(item)); err != nil {
				return err
			}
		}
		return nil
	})
}

// OrderRepository stores orders in a Database.
type OrderRepository struct {
	db *Database
}

// NewOrderRepository returns an OrderRepository on d.
func NewOrderRepository(d *Database) *OrderRepository { return &OrderRepository{db: d} }

// Create inserts the order with its items in one statement. An item of an unknown product
// violates the foreign key: catalog.ErrProductNotFound.
func (r *OrderRepository) Create(ctx context.Context, o *order.Order) error {
	return r.db.run(ctx, func(t *tx) error {
		for _, item := range o.Items() {
			if _, ok := productsTable.in(r.db).get(t, item.ProductID); !ok {
				return fmt.Errorf("memory: create order: foreign key product %q: %w", item.ProductID, catalog.ErrProductNotFound)
			}
		}
		if err := ordersTable.in(r.db).insert(ctx, t, cloneOrder(o)); err != nil {
			return err
		}
		return userOrdersTable.in(r.db).insert(ctx, t, userOrderKey{o.UserID(), o.ID()})
	})
}

// Get returns a copy of the order, or order.ErrNotFound.
func (r *OrderRepository) Get(ctx context.Context, id string) (*order.Order, error) {
	var found order.Order
	err := r.db.run(ctx, func(t *tx) error {
		o, ok := ordersTable.in(r.db).get(t, id)
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

// MarkCancelled turns the PENDING order CANCELLED under its row lock, or returns
// order.ErrNotCancellable.
func (r *OrderRepository) MarkCancelled(ctx context.Context, id string) error {
	return r.db.run(ctx, func(t *tx) error {
		o, ok, err := ordersTable.in(r.db).getForUpdate(ctx, t, id)
		if err != nil {
			return err
		}
		if !ok || o.Status() != order.StatusPending {
			return order.ErrNotCancellable
		}
		cancelled := cloneOrder(&o)
		if _, err := cancelled.Cancel(); err != nil {
			return err
		}
		return ordersTable.in(r.db).put(ctx, t, cancelled)
	})
}

// UnitsOrdered sums the units of productID in the user's PENDING and COMPLETED orders, found
// through the index of orders by user: a scan of the whole table would hold up every commit
// for as long as it takes.
func (r *OrderRepository) UnitsOrdered(ctx context.Context, userID, productID string) (int, error) {
	units := 0
	err := r.db.run(ctx, func(t *tx) error {
		for _, k := range userOrdersTable.in(r.db).rowsIn(t, userID) {
			o, ok := ordersTable.in(r.db).get(t, k.orderID)
			if !ok || (o.Status() != order.StatusPending && o.Status() != order.StatusCompleted) {
				continue
			}
			for _, item := range o.Items() {
				if item.ProductID == productID {
					units += item.Quantity
				}
			}
		}
		return nil
	})
	return units, err
}

// NewCommerceStores returns the commerce repositories on d.
func NewCommerceStores(d *Database) ports.CommerceStores {
	return ports.CommerceStores{
		Coupons:     NewCouponRepository(d),
		UserCoupons: NewUserCouponRepository(d),
		Wallets:     NewWalletRepository(d),
		Products:    NewProductRepository(d),
		Carts:       NewCartRepository(d),
		Orders:      NewOrderRepository(d),
		Stock:       NewStockRepository(d),
		Outbox:      NewOutboxRepository(d),
	}
}
