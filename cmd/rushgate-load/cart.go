package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/order"
)

// The cart herd: ONE user adds one unit --users times at once (a double-clicking client, a
// script): every add is a transaction on the same cart row, and none may be lost. A line holds at
// most order.MaxLineQuantity units, so the adds spread round-robin over as many products as that
// takes. Its invariant is Σ line quantities == adds answered 201, one cart for the user.

// newCartHerd is --users adds of one unit to one user's cart.
func newCartHerd(cfg config) (scenario, error) {
	products := max(1, (cfg.users+order.MaxLineQuantity-1)/order.MaxLineQuantity)
	if products > order.MaxCartLines {
		return nil, fmt.Errorf("cart-herd: --users %d: a cart holds at most %d × %d units",
			cfg.users, order.MaxCartLines, order.MaxLineQuantity)
	}
	return &cartHerd{adds: cfg.users, products: products}, nil
}

// cartHerd is adds racing for one cart row; add i is of product i mod products.
type cartHerd struct {
	adds, products int

	// Set by prepare.
	userID     string
	productIDs []string
	headers    map[string]string
}

var _ scenario = (*cartHerd)(nil)

func (s *cartHerd) shape() string {
	return fmt.Sprintf("%d adds of 1 unit of %d products → 1 user's cart", s.adds, s.products)
}

func (s *cartHerd) targets(gormdb.Dialect) []target {
	return []target{
		{measure: measureGoodputRatio},
		{measure: measureP99},
		{measure: measure429, bound: atMost, limit: 0},
	}
}

// prepare creates the products, with a unit of stock for every add, through the API and mints
// the user's token.
func (s *cartHerd) prepare(ctx context.Context, e *env) error {
	admin, err := e.adminToken()
	if err != nil {
		return fmt.Errorf("mint admin token: %w", err)
	}
	s.productIDs = make([]string, s.products)
	for p := range s.productIDs {
		body := map[string]any{"name": fmt.Sprintf("rushgate-load %s #%d", e.runID, p), "price": 1000, "stock": s.adds}
		product, err := createByAdmin(ctx, e.api, p, admin, "/admin/products", body)
		if err != nil {
			return fmt.Errorf("create product: %w", err)
		}
		s.productIDs[p] = product.ID
	}
	s.userID = "load-" + e.runID + "-shopper"
	bearer, err := e.userToken(s.userID)
	if err != nil {
		return fmt.Errorf("mint token for %s: %w", s.userID, err)
	}
	s.headers = map[string]string{"Authorization": "Bearer " + bearer}
	return nil
}

// run sends every add; an add succeeds with 201 only.
func (s *cartHerd) run(e *env) work {
	return work{n: s.adds, do: func(ctx context.Context, i int) attempt {
		body := map[string]any{"productId": s.productIDs[i%s.products], "quantity": 1}
		a, _ := e.api.post(ctx, i, "/api/cart/items", s.headers, body)
		a.ok = a.status == http.StatusCreated
		return a
	}}
}

// The cart's invariant: one cart for the user, one line per product, whose quantities add up to
// exactly the adds answered 201, give or take those whose outcome the run cannot know.
const (
	cartsOfUserSQL = `SELECT COUNT(*) FROM carts WHERE user_id = ?`
	cartLineSQL    = `SELECT COUNT(*), COALESCE(SUM(i.quantity), 0) FROM carts c JOIN cart_items i ON i.cart_id = c.id WHERE c.user_id = ?`
)

// invariant reads the user's carts and lines back and checks them against the answers.
func (s *cartHerd) invariant(ctx context.Context, e *env, attempts []attempt) (invariantResult, error) {
	d := e.db.Dialect()
	var carts, lines, quantity int
	if err := e.db.SQL().QueryRowContext(ctx, gormdb.Bind(d, cartsOfUserSQL), s.userID).Scan(&carts); err != nil {
		return invariantResult{}, fmt.Errorf("invariant: count carts: %w", err)
	}
	if err := e.db.SQL().QueryRowContext(ctx, gormdb.Bind(d, cartLineSQL), s.userID).Scan(&lines, &quantity); err != nil {
		return invariantResult{}, fmt.Errorf("invariant: read cart lines: %w", err)
	}
	answered201, unknown := 0, 0
	for _, a := range attempts {
		switch {
		case a.status == http.StatusCreated:
			answered201++
		case a.status == 0, a.status >= http.StatusInternalServerError:
			unknown++ // the add may or may not have committed
		}
	}
	var violations []string
	if carts != 1 {
		violations = append(violations, fmt.Sprintf("%d carts for one user", carts))
	}
	if lines != s.products {
		violations = append(violations, fmt.Sprintf("%d lines for %d products", lines, s.products))
	}
	if quantity < answered201 || quantity > answered201+unknown {
		violations = append(violations, fmt.Sprintf("line quantity %d, %d adds answered 201 (%d unknown)", quantity, answered201, unknown))
	}
	return invariantResult{
		rows: []invariantRow{
			{label: "db: carts of the user", value: carts},
			{label: "db: lines", value: lines},
			{label: "db: Σ line quantities", value: quantity},
			{label: "expected: adds answered 201", value: answered201},
		},
		violations: violations,
	}, nil
}

// The ceiling is the seed's add (commerce.md §2) through database/sql as one transaction: the
// cart row created if missing and locked, the stock read, the line read, then inserted or raised.
const (
	ceilingProductSQL = `INSERT INTO products (id, name, price, created_at) VALUES (?, ?, 1000, ?)`
	ceilingStockSQL   = `INSERT INTO stock (product_id, quantity, version) VALUES (?, ?, 0)`
	ceilingCartSQL    = `INSERT INTO carts (id, user_id, created_at) VALUES (?, ?, ?)`
	lockCartSQL       = `SELECT id FROM carts WHERE user_id = ? FOR UPDATE`
	readStockSQL      = `SELECT quantity FROM stock WHERE product_id = ?`
	readLineSQL       = `SELECT id, quantity FROM cart_items WHERE cart_id = ? AND product_id = ?`
	insertLineSQL     = `INSERT INTO cart_items (id, cart_id, product_id, quantity, added_at) VALUES (?, ?, ?, 1, ?)`
	raiseLineSQL      = `UPDATE cart_items SET quantity = ? WHERE id = ?`
)

// cartStatements are the add transaction's statements in one dialect.
type cartStatements struct {
	lockCart, readStock, readLine, insertLine, raiseLine string
}

// ceiling creates the products and the user's cart with SQL and returns the same adds as bare
// transactions.
func (s *cartHerd) ceiling(ctx context.Context, e *env) (work, error) {
	d := e.db.Dialect()
	userID := "ceiling-" + e.runID + "-shopper"
	now := time.Now().UTC()
	exec := func(query string, args ...any) error {
		if _, err := e.db.SQL().ExecContext(ctx, gormdb.Bind(d, query), args...); err != nil {
			return fmt.Errorf("ceiling: set up: %w", err)
		}
		return nil
	}
	if err := exec(ceilingCartSQL, uuid.NewString(), userID, now); err != nil {
		return work{}, err
	}
	productIDs := make([]string, s.products)
	for p := range productIDs {
		productIDs[p] = uuid.NewString()
		if err := exec(ceilingProductSQL, productIDs[p], fmt.Sprintf("rushgate-load ceiling %s #%d", e.runID, p), now); err != nil {
			return work{}, err
		}
		if err := exec(ceilingStockSQL, productIDs[p], s.adds); err != nil {
			return work{}, err
		}
	}
	stmts := cartStatements{
		lockCart:   gormdb.Bind(d, lockCartSQL),
		readStock:  gormdb.Bind(d, readStockSQL),
		readLine:   gormdb.Bind(d, readLineSQL),
		insertLine: gormdb.Bind(d, insertLineSQL),
		raiseLine:  gormdb.Bind(d, raiseLineSQL),
	}
	return work{n: s.adds, do: func(ctx context.Context, i int) attempt {
		ctx, cancel := context.WithTimeout(ctx, e.timeout)
		defer cancel()
		start := time.Now()
		err := addTx(ctx, e.db.SQL(), stmts, userID, productIDs[i%s.products])
		return attempt{latency: time.Since(start), ok: err == nil, err: err}
	}}, nil
}

// addTx adds one unit of productID to userID's cart in one transaction under the cart row's lock.
func addTx(ctx context.Context, db *sql.DB, stmts cartStatements, userID, productID string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op once committed
	var cartID string
	if err := tx.QueryRowContext(ctx, stmts.lockCart, userID).Scan(&cartID); err != nil {
		return fmt.Errorf("lock cart: %w", err)
	}
	var stock int64
	if err := tx.QueryRowContext(ctx, stmts.readStock, productID).Scan(&stock); err != nil {
		return fmt.Errorf("read stock: %w", err)
	}
	var lineID string
	var quantity int64
	switch err := tx.QueryRowContext(ctx, stmts.readLine, cartID, productID).Scan(&lineID, &quantity); {
	case errors.Is(err, sql.ErrNoRows):
		_, err = tx.ExecContext(ctx, stmts.insertLine, uuid.NewString(), cartID, productID, time.Now().UTC())
		if err != nil {
			return fmt.Errorf("insert line: %w", err)
		}
	case err != nil:
		return fmt.Errorf("read line: %w", err)
	case !catalog.RebuildStock(productID, stock, 0).Covers(quantity + 1):
		return fmt.Errorf("stock %d does not cover %d", stock, quantity+1)
	default:
		if _, err := tx.ExecContext(ctx, stmts.raiseLine, quantity+1, lineID); err != nil {
			return fmt.Errorf("raise line: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
