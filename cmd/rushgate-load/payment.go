package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
)

// The payment herd: --users users each pay a PENDING order of one unit of ONE product with
// --capacity in stock, all at once: every payment deducts the same stock row, a hot key the
// lane stock:{productId} combines. Judged on how fast the stock is sold (payments per second
// until the last one, against the bare one-transaction payment through database/sql), p99 and
// 429s; its invariant: stock never negative, Σ history OUT == units sold == 200s,
// balance == Σ ledger for every payer, no negative balance, one outbox message per paid order.

const (
	codeStockDeductionFailed = "STOCK_DEDUCTION_FAILED"
	paymentPrice             = 700
	paymentBalance           = 1000
	// bulkRows bounds one multi-row INSERT of the preparation, far below both databases' limit
	// of parameters per statement.
	bulkRows = 500
)

// newPaymentHerd is --users payers for ONE product of --capacity units.
func newPaymentHerd(cfg config) (scenario, error) {
	if cfg.capacity < 1 {
		return nil, errors.New("payment-herd: --capacity must be at least 1")
	}
	return &paymentHerd{users: cfg.users, stock: cfg.capacity}, nil
}

// paymentHerd is payers racing for one product's stock.
type paymentHerd struct {
	users, stock int

	// Set by prepare.
	productID string
	payments  []payment
	started   time.Time
}

// payment is one payer's request.
type payment struct {
	userID, orderID, path string
	headers               map[string]string
}

var _ scenario = (*paymentHerd)(nil)

func (s *paymentHerd) shape() string {
	return fmt.Sprintf("%d payers → 1 product of %d units", s.users, s.stock)
}

func (s *paymentHerd) targets(gormdb.Dialect) []target {
	return []target{
		{measure: measureGrantRateRatio, bound: atLeast, limit: 1, concurrency: 64},
		{measure: measureTimeToFill, grants: min(s.users, s.stock)},
		{measure: measureP99},
		{measure: measure429},
	}
}

// shop is a product and its payers with one PENDING order each, written straight to the
// database: the herd's preparation is not what is measured.
type shop struct {
	productID string
	userIDs   []string
	orderIDs  []string
}

// openShop inserts a product of stock units and n users with paymentBalance points (and their
// opening ledger entries) and one PENDING order of one unit each, in multi-row INSERTs.
func openShop(ctx context.Context, db *gormdb.DB, prefix string, n, stock int) (shop, error) {
	now := time.Now().UTC()
	sh := shop{productID: uuid.NewString(), userIDs: make([]string, n), orderIDs: make([]string, n)}
	if err := bulkInsert(ctx, db, "products (id, name, price, created_at)", [][]any{{sh.productID, "load " + prefix, paymentPrice, now}}); err != nil {
		return shop{}, err
	}
	if err := bulkInsert(ctx, db, "stock (product_id, quantity, version)", [][]any{{sh.productID, stock, 0}}); err != nil {
		return shop{}, err
	}
	var users, ledger, orders, items [][]any
	for i := range n {
		sh.userIDs[i], sh.orderIDs[i] = fmt.Sprintf("%s-%d", prefix, i), uuid.NewString()
		users = append(users, []any{sh.userIDs[i], paymentBalance, now, now})
		ledger = append(ledger, []any{uuid.NewString(), sh.userIDs[i], "OPENING", paymentBalance, paymentBalance, "load", now})
		orders = append(orders, []any{sh.orderIDs[i], sh.userIDs[i], paymentPrice, 0, paymentPrice, "PENDING", now})
		items = append(items, []any{sh.orderIDs[i], 0, sh.productID, "load", 1, paymentPrice, paymentPrice})
	}
	for _, table := range []struct {
		into string
		rows [][]any
	}{
		{"users (id, balance, created_at, updated_at)", users},
		{"balance_ledger (id, user_id, kind, amount, balance_after, reference, created_at)", ledger},
		{"orders (id, user_id, subtotal_amount, discount_amount, total_amount, status, created_at)", orders},
		{"order_items (order_id, line, product_id, name, quantity, unit_price, subtotal)", items},
	} {
		if err := bulkInsert(ctx, db, table.into, table.rows); err != nil {
			return shop{}, err
		}
	}
	return sh, nil
}

// bulkInsert inserts rows into "table (columns)" bulkRows at a time.
func bulkInsert(ctx context.Context, db *gormdb.DB, into string, rows [][]any) error {
	for start := 0; start < len(rows); start += bulkRows {
		chunk := rows[start:min(start+bulkRows, len(rows))]
		tuple := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(chunk[0])), ", ") + ")"
		query := "INSERT INTO " + into + " VALUES " + strings.TrimSuffix(strings.Repeat(tuple+", ", len(chunk)), ", ")
		args := make([]any, 0, len(chunk)*len(chunk[0]))
		for _, row := range chunk {
			args = append(args, row...)
		}
		if _, err := db.SQL().ExecContext(ctx, gormdb.Bind(db.Dialect(), query), args...); err != nil {
			return fmt.Errorf("insert into %s: %w", strings.Fields(into)[0], err)
		}
	}
	return nil
}

// prepare writes the product, payers and orders and mints one token per payer.
func (s *paymentHerd) prepare(ctx context.Context, e *env) error {
	sh, err := openShop(ctx, e.db, "load-"+e.runID+"-pay", s.users, s.stock)
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	s.productID = sh.productID
	s.payments = make([]payment, s.users)
	for i := range s.payments {
		bearer, err := e.userToken(sh.userIDs[i])
		if err != nil {
			return fmt.Errorf("mint token for %s: %w", sh.userIDs[i], err)
		}
		s.payments[i] = payment{userID: sh.userIDs[i], orderID: sh.orderIDs[i],
			path:    "/api/orders/" + url.PathEscape(sh.orderIDs[i]) + "/payment",
			headers: map[string]string{"Authorization": "Bearer " + bearer, rghttp.IdempotencyKeyHeader: "pay-" + e.runID}}
	}
	s.started = time.Now().UTC().Add(-time.Second)
	return nil
}

// run sends every payment; a payment succeeds with 200 only.
func (s *paymentHerd) run(e *env) work {
	return work{n: s.users, do: func(ctx context.Context, i int) attempt {
		p := s.payments[i]
		a, _ := e.api.post(ctx, i, p.path, p.headers, nil)
		a.ok = a.status == http.StatusOK
		return a
	}}
}

// The herd's invariant, read straight from the database.
const (
	stockLeftSQL   = `SELECT quantity FROM stock WHERE product_id = ?`
	stockOutSQL    = `SELECT COUNT(*), COALESCE(SUM(before_quantity - after_quantity), 0) FROM stock_history WHERE product_id = ? AND type = 'OUT'`
	paidOrdersSQL  = `SELECT o.id, o.user_id FROM orders o JOIN order_items i ON i.order_id = o.id WHERE i.product_id = ? AND o.status = 'COMPLETED'`
	wrongWalletSQL = `SELECT COUNT(*) FROM users u WHERE u.id LIKE ? AND (u.balance < 0 OR u.balance <> ` +
		`(SELECT COALESCE(SUM(l.amount), 0) FROM balance_ledger l WHERE l.user_id = u.id))`
	outboxSinceSQL = `SELECT payload FROM outbox WHERE created_at >= ?`
)

// invariant checks the stock, its history, the paid orders against the answers, every payer's
// wallet, and the outbox.
func (s *paymentHerd) invariant(ctx context.Context, e *env, attempts []attempt) (invariantResult, error) {
	db, d := e.db.SQL(), e.db.Dialect()
	var left, movements, out int
	if err := db.QueryRowContext(ctx, gormdb.Bind(d, stockLeftSQL), s.productID).Scan(&left); err != nil {
		return invariantResult{}, fmt.Errorf("invariant: read stock: %w", err)
	}
	if err := db.QueryRowContext(ctx, gormdb.Bind(d, stockOutSQL), s.productID).Scan(&movements, &out); err != nil {
		return invariantResult{}, fmt.Errorf("invariant: read stock history: %w", err)
	}
	paid := map[string]bool{}
	if err := queryRows(ctx, db, gormdb.Bind(d, paidOrdersSQL), []any{s.productID}, func(rows *sql.Rows) error {
		var orderID, userID string
		err := rows.Scan(&orderID, &userID)
		paid[orderID] = true
		return err
	}); err != nil {
		return invariantResult{}, fmt.Errorf("invariant: read paid orders: %w", err)
	}
	var wrongWallets int
	prefix := strings.TrimSuffix(s.payments[0].userID, "-0") + "-%"
	if err := db.QueryRowContext(ctx, gormdb.Bind(d, wrongWalletSQL), prefix).Scan(&wrongWallets); err != nil {
		return invariantResult{}, fmt.Errorf("invariant: check wallets: %w", err)
	}
	messages := map[string]int{}
	if err := queryRows(ctx, db, gormdb.Bind(d, outboxSinceSQL), []any{s.started}, func(rows *sql.Rows) error {
		var payload string
		if err := rows.Scan(&payload); err != nil {
			return err
		}
		var body struct {
			OrderID string `json:"orderId"`
		}
		if err := json.Unmarshal([]byte(payload), &body); err != nil {
			return err
		}
		if paid[body.OrderID] {
			messages[body.OrderID]++
		}
		return nil
	}); err != nil {
		return invariantResult{}, fmt.Errorf("invariant: read outbox: %w", err)
	}

	answered200, unknown := 0, 0
	var violations []string
	for i, a := range attempts {
		switch {
		case a.status == http.StatusOK:
			answered200++
			if !paid[s.payments[i].orderID] {
				violations = append(violations, fmt.Sprintf("%s was answered 200 but its order is not paid", s.payments[i].userID))
			}
		case a.status == 0, a.status >= http.StatusInternalServerError:
			unknown++
		case paid[s.payments[i].orderID]:
			violations = append(violations, fmt.Sprintf("%s was answered %d %s but its order is paid", s.payments[i].userID, a.status, a.code))
		}
	}
	if left < 0 || left+len(paid) != s.stock || out != len(paid) || movements != len(paid) {
		violations = append(violations, fmt.Sprintf("stock %d left of %d, %d orders paid, history OUT %d units in %d rows", left, s.stock, len(paid), out, movements))
	}
	if len(paid) < answered200 || len(paid) > answered200+unknown {
		violations = append(violations, fmt.Sprintf("%d orders paid, %d answered 200 (%d unknown)", len(paid), answered200, unknown))
	}
	if wrongWallets > 0 {
		violations = append(violations, fmt.Sprintf("%d payers with a negative balance or balance != Σ ledger", wrongWallets))
	}
	for id := range paid {
		if messages[id] != 1 {
			violations = append(violations, fmt.Sprintf("paid order %s has %d outbox messages", id, messages[id]))
			break
		}
	}
	return invariantResult{
		rows: []invariantRow{
			{label: "db: stock left", value: left},
			{label: "db: Σ stock_history OUT", value: out},
			{label: "db: orders paid", value: len(paid)},
			{label: "db: outbox messages of paid orders", value: len(messages)},
			{label: "db: payers with balance != Σ ledger", value: wrongWallets},
			{label: "expected: payments answered 200", value: answered200},
		},
		violations: violations,
	}, nil
}

// queryRows runs query and calls scan on each row.
func queryRows(ctx context.Context, db *sql.DB, query string, args []any, scan func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }() // rows.Err below reports what matters
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// The ceiling is the same one-transaction payment through database/sql, one payment per
// transaction and no lock or combining: the order and the balance FOR UPDATE, the stock read,
// the optimistic deduction (retried in a fresh transaction up to 3 times on a conflict, as
// rushgate does), the history row, the order COMPLETED and its line rolled up into the top
// products' product_sales_hourly, the balance and its ledger entry, and the outbox row.
const (
	lockOrderSQL        = `SELECT status, total_amount FROM orders WHERE id = ? FOR UPDATE`
	readStockVersionSQL = `SELECT quantity, version FROM stock WHERE product_id = ?`
	deductStockSQL      = `UPDATE stock SET quantity = quantity - 1, version = version + 1 WHERE product_id = ? AND version = ? AND quantity >= 1`
	insertHistorySQL    = `INSERT INTO stock_history (id, product_id, type, before_quantity, after_quantity, ref_type, ref_id, created_at) VALUES (?, ?, 'OUT', ?, ?, 'ORDER', ?, ?)`
	payOrderSQL         = `UPDATE orders SET status = 'COMPLETED', paid_at = ? WHERE id = ? AND status = 'PENDING'`
	rollUpSaleSQL       = `INSERT INTO product_sales_hourly (product_id, hour_start, units, revenue) VALUES (?, ?, 1, ?) `
	insertOutboxSQL     = `INSERT INTO outbox (id, payload, status, attempts, next_attempt_at, last_error, created_at) VALUES (?, ?, 'PENDING', 0, ?, '', ?)`
	ceilingRetries      = 3
)

var errStockConflict = errors.New("stock version conflict")

// paymentStatements are the payment transaction's statements in one dialect.
type paymentStatements struct {
	lockOrder, lockBalance, readStock, deductStock, insertHistory, payOrder, rollUpSale, updateBalance, insertLedger, insertOutbox string
}

func (s *paymentHerd) ceiling(ctx context.Context, e *env) (work, error) {
	sh, err := openShop(ctx, e.db, "ceiling-"+e.runID+"-pay", s.users, s.stock)
	if err != nil {
		return work{}, fmt.Errorf("ceiling: %w", err)
	}
	d := e.db.Dialect()
	stmts := paymentStatements{
		lockOrder: gormdb.Bind(d, lockOrderSQL), lockBalance: gormdb.Bind(d, lockBalanceSQL), readStock: gormdb.Bind(d, readStockVersionSQL),
		deductStock: gormdb.Bind(d, deductStockSQL), insertHistory: gormdb.Bind(d, insertHistorySQL), payOrder: gormdb.Bind(d, payOrderSQL),
		rollUpSale:    gormdb.Bind(d, rollUpSaleSQL+gormdb.SalesRollupUpsert(d)),
		updateBalance: gormdb.Bind(d, updateBalanceSQL), insertLedger: gormdb.Bind(d, insertLedgerSQL), insertOutbox: gormdb.Bind(d, insertOutboxSQL),
	}
	return work{n: s.users, do: func(ctx context.Context, i int) attempt {
		ctx, cancel := context.WithTimeout(ctx, e.timeout)
		defer cancel()
		start := time.Now()
		var code string
		for range ceilingRetries + 1 {
			code, err = payTx(ctx, e.db.SQL(), stmts, sh.productID, sh.orderIDs[i], sh.userIDs[i])
			if !errors.Is(err, errStockConflict) {
				break
			}
			code, err = codeStockDeductionFailed, nil
		}
		return attempt{latency: time.Since(start), ok: code == "" && err == nil, code: code, err: err}
	}}, nil
}

// payTx pays orderID of userID for one unit of productID in one transaction; it returns the
// refusal's code ("" when paid), errStockConflict to retry, or a database failure.
func payTx(ctx context.Context, db *sql.DB, stmts paymentStatements, productID, orderID, userID string) (string, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op once committed
	var (
		status         string
		total, balance int64
		left, version  int64
	)
	if err := tx.QueryRowContext(ctx, stmts.lockOrder, orderID).Scan(&status, &total); err != nil {
		return "", fmt.Errorf("lock order: %w", err)
	}
	if status != "PENDING" {
		return "ORDER_NOT_PAYABLE", nil
	}
	if err := tx.QueryRowContext(ctx, stmts.lockBalance, userID).Scan(&balance); err != nil {
		return "", fmt.Errorf("lock balance: %w", err)
	}
	if balance < total {
		return "INSUFFICIENT_BALANCE", nil
	}
	if err := tx.QueryRowContext(ctx, stmts.readStock, productID).Scan(&left, &version); err != nil {
		return "", fmt.Errorf("read stock: %w", err)
	}
	if left < 1 {
		return codeStockDeductionFailed, nil
	}
	res, err := tx.ExecContext(ctx, stmts.deductStock, productID, version)
	if err != nil {
		return "", fmt.Errorf("deduct stock: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return "", errors.Join(errStockConflict, err)
	}
	now := time.Now().UTC()
	messageID := uuid.NewString()
	payload, _ := json.Marshal(map[string]any{"messageId": messageID, "orderId": orderID, "userId": userID, "totalAmount": total, "paidAt": now})
	for _, st := range []struct {
		query string
		args  []any
	}{
		{stmts.insertHistory, []any{uuid.NewString(), productID, left, left - 1, orderID, now}},
		{stmts.payOrder, []any{now, orderID}},
		{stmts.rollUpSale, []any{productID, now.Truncate(time.Hour), total}},
		{stmts.updateBalance, []any{balance - total, now, userID}},
		{stmts.insertLedger, []any{uuid.NewString(), userID, "PAYMENT", -total, balance - total, "order:" + orderID, now}},
		{stmts.insertOutbox, []any{messageID, string(payload), now, now}},
	} {
		if _, err := tx.ExecContext(ctx, st.query, st.args...); err != nil {
			return "", fmt.Errorf("pay: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("commit: %w", err)
	}
	return "", nil
}
