package gormdb

import (
	"context"
	"database/sql"
	"strconv"
	"time"

	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.ProductRepository = (*ProductRepository)(nil)
	_ ports.CartRepository    = (*CartRepository)(nil)
	_ ports.OrderRepository   = (*OrderRepository)(nil)
)

// ProductRepository stores products and their stock; it implements ports.ProductRepository.
type ProductRepository struct {
	db *DB
	tx *TxRunner
	// Hand-written statements (see statement.go), bound to db's dialect once.
	insertProductSQL, insertStockSQL, getSQL string
}

// NewProductRepository returns the product repository of db.
func NewProductRepository(db *DB) *ProductRepository {
	return &ProductRepository{
		db:               db,
		tx:               NewTxRunner(db),
		insertProductSQL: Bind(db.dialect, "INSERT INTO products (id, name, price, created_at) VALUES (?, ?, ?, ?)"),
		insertStockSQL:   Bind(db.dialect, "INSERT INTO stock (product_id, quantity, version) VALUES (?, ?, ?)"),
		getSQL: Bind(db.dialect, "SELECT p.name, p.price, p.created_at, s.quantity, s.version "+
			"FROM products p JOIN stock s ON s.product_id = p.id WHERE p.id = ?"),
	}
}

// Create inserts the product and its stock row in one transaction (the caller's, when ctx
// carries one).
func (r *ProductRepository) Create(ctx context.Context, p *catalog.Product, s catalog.Stock) error {
	m := errorMeanings{op: "create product"}
	return r.tx.InTx(ctx, func(ctx context.Context) error {
		if _, err := r.db.exec(ctx, m, r.insertProductSQL, p.ID(), p.Name(), p.Price(), p.CreatedAt().UTC()); err != nil {
			return err
		}
		_, err := r.db.exec(ctx, m, r.insertStockSQL, s.ProductID(), s.Quantity(), s.Version())
		return err
	})
}

// Get returns the product and its stock in one SELECT, or catalog.ErrProductNotFound.
func (r *ProductRepository) Get(ctx context.Context, id string) (*catalog.Product, catalog.Stock, error) {
	var (
		name                     string
		price, quantity, version int64
		createdAt                time.Time
	)
	found, err := r.db.queryOne(ctx, errorMeanings{op: "get product"}, r.getSQL, []any{id}, func(rows *sql.Rows) error {
		return rows.Scan(&name, &price, &createdAt, &quantity, &version)
	})
	if err != nil {
		return nil, catalog.Stock{}, err
	}
	if !found {
		return nil, catalog.Stock{}, catalog.ErrProductNotFound
	}
	return catalog.RebuildProduct(id, name, price, createdAt.UTC()), catalog.RebuildStock(id, quantity, version), nil
}

// CartRepository stores carts and their items; it implements ports.CartRepository.
type CartRepository struct {
	db *DB
	// Hand-written statements (see statement.go), bound to db's dialect once.
	getForUpdateSQL, createSQL, linesSQL, putItemSQL, clearSQL, addCommittedSQL string
}

// NewCartRepository returns the cart repository of db.
func NewCartRepository(db *DB) *CartRepository {
	r := &CartRepository{
		db:              db,
		getForUpdateSQL: Bind(db.dialect, "SELECT id, user_id, created_at FROM carts WHERE user_id = ? FOR UPDATE"),
		linesSQL: Bind(db.dialect, "SELECT i.id, i.cart_id, i.product_id, i.quantity, i.added_at, p.name, p.price, s.quantity "+
			"FROM carts c JOIN cart_items i ON i.cart_id = c.id JOIN products p ON p.id = i.product_id "+
			"JOIN stock s ON s.product_id = i.product_id WHERE c.user_id = ? ORDER BY i.added_at, i.id"),
		clearSQL: Bind(db.dialect, "DELETE FROM cart_items WHERE cart_id = ?"),
	}
	// A cart that exists is not an error: the insert records the add on it, in front of the
	// recent adds, keeping ports.RecentCartAdds.
	recent := strconv.Itoa(ports.RecentCartAdds)
	if db.dialect == Postgres {
		r.createSQL = Bind(db.dialect, "INSERT INTO carts (id, user_id, created_at, recent_add_ids) VALUES (?, ?, ?, ARRAY[?]) "+
			"ON CONFLICT (user_id) DO UPDATE SET recent_add_ids = (EXCLUDED.recent_add_ids || carts.recent_add_ids)[1:"+recent+"]")
		r.putItemSQL = Bind(db.dialect, "INSERT INTO cart_items (id, cart_id, product_id, quantity, added_at) VALUES (?, ?, ?, ?, ?) "+
			"ON CONFLICT (cart_id, product_id) DO UPDATE SET quantity = EXCLUDED.quantity")
		// A locking read does not wait for a row another transaction is inserting (it does not
		// see it); an insert on the same unique key does, and DO UPDATE then locks the row, waiting
		// for a transaction that holds it, and reads it as committed. Inserted, the cart is empty.
		r.addCommittedSQL = Bind(db.dialect, "INSERT INTO carts (id, user_id, created_at) VALUES (?, ?, ?) "+
			"ON CONFLICT (user_id) DO UPDATE SET recent_add_ids = carts.recent_add_ids "+
			"RETURNING coalesce(? = ANY(recent_add_ids), false)")
	} else {
		r.createSQL = "INSERT INTO carts (id, user_id, created_at, recent_add_ids) VALUES (?, ?, ?, ?) " +
			"ON DUPLICATE KEY UPDATE recent_add_ids = SUBSTRING_INDEX(CONCAT_WS(',', VALUES(recent_add_ids), recent_add_ids), ',', " + recent + ")"
		r.putItemSQL = "INSERT INTO cart_items (id, cart_id, product_id, quantity, added_at) VALUES (?, ?, ?, ?, ?) " +
			"ON DUPLICATE KEY UPDATE quantity = VALUES(quantity)"
		// A shared lock waits for a transaction that holds the cart's row or is inserting it
		// (its implicit lock on the new record), then reads the row as committed.
		r.addCommittedSQL = "SELECT COALESCE(FIND_IN_SET(?, recent_add_ids) > 0, FALSE) FROM carts WHERE user_id = ? LOCK IN SHARE MODE"
	}
	return r
}

// GetOrCreateForUpdate inserts fresh with addID as its recent adds, or puts addID in front of
// the user's cart's recent adds in the same statement (a cart a concurrent transaction is
// inserting or holds makes it wait for that one), then reads the cart with SELECT … FOR UPDATE.
// Inserting first spares MySQL the gap lock a locking read of a missing row takes, on which
// concurrent first adds would deadlock. Recording the add costs no round trip: the statement
// ran before, doing nothing on a cart that existed; now it updates the row it locks anyway.
// Outside TxRunner.InTx it fails: the lock would be released at once.
func (r *CartRepository) GetOrCreateForUpdate(ctx context.Context, fresh order.Cart, addID string) (order.Cart, error) {
	if _, ok := r.db.transaction(ctx); !ok {
		return order.Cart{}, errNoTransaction
	}
	_, err := r.db.exec(ctx, errorMeanings{op: "create cart"}, r.createSQL, fresh.ID(), fresh.UserID(), fresh.CreatedAt().UTC(), addID)
	if err != nil {
		return order.Cart{}, err
	}
	cart, found, err := r.GetForUpdate(ctx, fresh.UserID())
	if err == nil && !found {
		// Unreachable: the statement above inserted the row or met the one that exists.
		return order.Cart{}, translate(sql.ErrNoRows, errorMeanings{op: "read created cart"})
	}
	return cart, err
}

// GetForUpdate reads the user's cart with SELECT … FOR UPDATE, locking its row until the
// transaction in ctx ends. Outside TxRunner.InTx it fails.
func (r *CartRepository) GetForUpdate(ctx context.Context, userID string) (order.Cart, bool, error) {
	if _, ok := r.db.transaction(ctx); !ok {
		return order.Cart{}, false, errNoTransaction
	}
	var (
		cart  order.Cart
		found bool
	)
	err := r.db.query(ctx, errorMeanings{op: "get cart for update"}, r.getForUpdateSQL, []any{userID}, func(rows *sql.Rows) error {
		var (
			id        string
			createdAt time.Time
		)
		if err := rows.Scan(&id, &userID, &createdAt); err != nil {
			return err
		}
		cart, found = order.RebuildCart(id, userID, createdAt.UTC()), true
		return nil
	})
	return cart, found, err
}

// AddCommitted reads whether the cart's recent adds hold addID, in one statement on the
// primary that waits for a transaction holding or creating the cart's row (the add whose
// COMMIT's answer was lost, until the database has ended it): on Postgres an insert of fresh
// that meets the cart's unique key, on MySQL a read with a shared lock.
func (r *CartRepository) AddCommitted(ctx context.Context, fresh order.Cart, addID string) (bool, error) {
	args := []any{addID, fresh.UserID()}
	if r.db.dialect == Postgres {
		args = []any{fresh.ID(), fresh.UserID(), fresh.CreatedAt().UTC(), addID}
	}
	var committed bool
	_, err := r.db.queryOne(ctx, errorMeanings{op: "read recent cart adds"}, r.addCommittedSQL, args,
		func(rows *sql.Rows) error { return rows.Scan(&committed) })
	return committed, err
}

// Lines reads the user's cart items with their products and stock in one joined SELECT.
func (r *CartRepository) Lines(ctx context.Context, userID string) ([]order.CartLine, error) {
	var lines []order.CartLine
	err := r.db.query(ctx, errorMeanings{op: "read cart lines"}, r.linesSQL, []any{userID}, func(rows *sql.Rows) error {
		var (
			l                     order.CartLine
			id, cartID, productID string
			quantity              int
			addedAt               time.Time
		)
		if err := rows.Scan(&id, &cartID, &productID, &quantity, &addedAt, &l.Name, &l.UnitPrice, &l.Stock); err != nil {
			return err
		}
		l.CartItem = order.RebuildCartItem(id, cartID, productID, quantity, addedAt.UTC())
		lines = append(lines, l)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return lines, nil
}

// PutItem inserts the item or, on the (cart_id, product_id) key, sets the existing line's
// quantity in the same statement.
func (r *CartRepository) PutItem(ctx context.Context, item order.CartItem) error {
	_, err := r.db.exec(ctx, errorMeanings{op: "put cart item", notFound: catalog.ErrProductNotFound}, r.putItemSQL,
		item.ID(), item.CartID(), item.ProductID(), item.Quantity(), item.AddedAt().UTC())
	return err
}

// Clear deletes every item of the cart.
func (r *CartRepository) Clear(ctx context.Context, cartID string) error {
	_, err := r.db.exec(ctx, errorMeanings{op: "clear cart"}, r.clearSQL, cartID)
	return err
}

// OrderRepository stores orders and their items; it implements ports.OrderRepository.
type OrderRepository struct {
	db *DB
	tx *TxRunner
	// Hand-written statements (see statement.go), bound to db's dialect once.
	insertSQL, getSQL, getForUpdateSQL, itemsSQL, unitsOrderedSQL string
}

// orderColumnsSQL reads an order's row without its items.
const orderColumnsSQL = "SELECT user_id, coupon_id, subtotal_amount, discount_amount, total_amount, status, " +
	"created_at, paid_at FROM orders WHERE id = ?"

// NewOrderRepository returns the order repository of db.
func NewOrderRepository(db *DB) *OrderRepository {
	return &OrderRepository{
		db: db,
		tx: NewTxRunner(db),
		insertSQL: Bind(db.dialect, "INSERT INTO orders (id, user_id, coupon_id, subtotal_amount, discount_amount, "+
			"total_amount, status, created_at, paid_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"),
		getSQL: Bind(db.dialect, orderColumnsSQL),
		// A locking read returns the row as committed, not as the transaction's snapshot saw it.
		getForUpdateSQL: Bind(db.dialect, orderColumnsSQL+" FOR UPDATE"),
		itemsSQL: Bind(db.dialect, "SELECT product_id, name, quantity, unit_price, subtotal FROM order_items "+
			"WHERE order_id = ? ORDER BY line"),
		// Served by orders_by_user (the user's few orders), then the (order_id, product_id) key.
		unitsOrderedSQL: Bind(db.dialect, "SELECT COALESCE(SUM(i.quantity), 0) FROM orders o "+
			"JOIN order_items i ON i.order_id = o.id AND i.product_id = ? "+
			"WHERE o.user_id = ? AND o.status IN ('PENDING', 'COMPLETED')"+latestCommitted(db.dialect)),
	}
}

// Create inserts the order and, in one multi-row INSERT, its items, and rolls a COMPLETED one up
// as MarkPaid does, in one transaction (the caller's, when ctx carries one). An order holds at
// most order.MaxCartLines items, far below the databases' limit of parameters per statement.
func (r *OrderRepository) Create(ctx context.Context, o *order.Order) error {
	m := errorMeanings{op: "create order", notFound: catalog.ErrProductNotFound}
	var couponID sql.NullString
	if o.CouponID() != "" {
		couponID = sql.NullString{String: o.CouponID(), Valid: true}
	}
	var paidAt sql.NullTime
	if at := o.PaidAt(); at != nil {
		paidAt = sql.NullTime{Time: at.UTC().Truncate(time.Microsecond), Valid: true}
	}
	items := o.Items()
	insertItems := Bind(r.db.dialect, "INSERT INTO order_items (order_id, line, product_id, name, quantity, unit_price, subtotal) VALUES "+
		tuples(len(items), 7))
	args := make([]any, 0, 7*len(items))
	for i, item := range items {
		args = append(args, o.ID(), i, item.ProductID, item.Name, item.Quantity, item.UnitPrice, item.Subtotal)
	}
	return r.tx.InTx(ctx, func(ctx context.Context) error {
		_, err := r.db.exec(ctx, m, r.insertSQL, o.ID(), o.UserID(), couponID, o.Subtotal(), o.Discount(), o.Total(),
			string(o.Status()), o.CreatedAt().UTC(), paidAt)
		if err != nil || len(items) == 0 {
			return err
		}
		if _, err = r.db.exec(ctx, m, insertItems, args...); err != nil || !paidAt.Valid {
			return err
		}
		return r.rollUpSales(ctx, o.ID(), paidAt.Time)
	})
}

// Get reads the order, then its items in line order, or returns order.ErrNotFound. The two
// reads need no transaction: an order and its items are inserted together, and only the order's
// status (and paid_at) ever changes.
func (r *OrderRepository) Get(ctx context.Context, id string) (*order.Order, error) {
	return r.read(ctx, errorMeanings{op: "get order", notFound: order.ErrNotFound}, r.getSQL, id)
}

// read reads the order's row with query, then its items, both within one TxTimeout.
func (r *OrderRepository) read(ctx context.Context, m errorMeanings, query, id string) (*order.Order, error) {
	ctx, cancel := r.db.bounded(ctx)
	defer cancel()
	var (
		userID                    string
		couponID                  sql.NullString
		subtotal, discount, total int64
		status                    string
		createdAt                 time.Time
		paidAt                    sql.NullTime
		items                     []order.Item
		found                     bool
	)
	err := r.db.query(ctx, m, query, []any{id}, func(rows *sql.Rows) error {
		found = true
		return rows.Scan(&userID, &couponID, &subtotal, &discount, &total, &status, &createdAt, &paidAt)
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, order.ErrNotFound
	}
	err = r.db.query(ctx, m, r.itemsSQL, []any{id}, func(rows *sql.Rows) error {
		var item order.Item
		if err := rows.Scan(&item.ProductID, &item.Name, &item.Quantity, &item.UnitPrice, &item.Subtotal); err != nil {
			return err
		}
		items = append(items, item)
		return nil
	})
	if err != nil {
		return nil, err
	}
	var paid *time.Time
	if paidAt.Valid {
		at := paidAt.Time.UTC()
		paid = &at
	}
	return order.Rebuild(id, userID, couponID.String, items, subtotal, discount, total, order.Status(status),
		createdAt.UTC(), paid), nil
}

// UnitsOrdered sums the units of productID in the user's PENDING and COMPLETED orders in one
// SELECT, of the orders committed when it runs: a Postgres statement reads them (READ
// COMMITTED), and on MySQL it is a locking read, since a plain read there sees the snapshot of
// the transaction's first plain read, which may come before the cart's lock.
func (r *OrderRepository) UnitsOrdered(ctx context.Context, userID, productID string) (int, error) {
	var units int
	_, err := r.db.queryOne(ctx, errorMeanings{op: "count units ordered"}, r.unitsOrderedSQL, []any{productID, userID},
		func(rows *sql.Rows) error { return rows.Scan(&units) })
	return units, err
}

// NewCommerceStores returns the commerce repositories of db.
func NewCommerceStores(db *DB) ports.CommerceStores {
	return ports.CommerceStores{
		Coupons:     NewCouponRepository(db),
		UserCoupons: NewUserCouponRepository(db),
		Wallets:     NewWalletRepository(db),
		Products:    NewProductRepository(db),
		Carts:       NewCartRepository(db),
		Orders:      NewOrderRepository(db),
		Stock:       NewStockRepository(db),
		Outbox:      NewOutboxRepository(db),
	}
}

// latestCommitted is what a read in a transaction needs to see the rows committed when it runs
// rather than its transaction's snapshot: nothing on Postgres (READ COMMITTED), a shared lock on
// MySQL (REPEATABLE READ), whose locking reads read the latest committed rows.
func latestCommitted(d Dialect) string {
	if d == MySQL {
		return " LOCK IN SHARE MODE"
	}
	return ""
}
