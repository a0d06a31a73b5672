package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
)

// The charge herd: ONE user charges its balance --users times at once, each charge with its
// own Idempotency-Key: every charge is a transaction on the same balance row. Its invariant is
// balance == Σ ledger == initial + n × amount.

// chargeAmount is what every charge of the herd adds.
const chargeAmount = 1000

// newChargeHerd is --users charges of one user.
func newChargeHerd(cfg config) (scenario, error) {
	return &chargeHerd{charges: cfg.users}, nil
}

// chargeHerd is charges racing for one balance row.
type chargeHerd struct {
	charges int

	// Set by prepare.
	userID  string
	path    string
	headers []map[string]string
}

var _ scenario = (*chargeHerd)(nil)

func (s *chargeHerd) shape() string {
	return fmt.Sprintf("%d charges of %d → 1 user", s.charges, chargeAmount)
}

func (s *chargeHerd) targets(gormdb.Dialect) []target {
	return []target{
		{measure: measureGoodputRatio},
		{measure: measureP99},
		{measure: measure429, bound: atMost, limit: 0},
	}
}

// prepare creates the user, with a zero balance, through the API and mints its token.
func (s *chargeHerd) prepare(ctx context.Context, e *env) error {
	admin, err := e.adminToken()
	if err != nil {
		return fmt.Errorf("mint admin token: %w", err)
	}
	s.userID = "load-" + e.runID + "-payer"
	if _, err := createByAdmin(ctx, e.api, 0, admin, "/admin/users", map[string]any{"id": s.userID, "balance": 0}); err != nil {
		return fmt.Errorf("create user: %w", err)
	}
	bearer, err := e.userToken(s.userID)
	if err != nil {
		return fmt.Errorf("mint token for %s: %w", s.userID, err)
	}
	s.path = "/api/users/" + url.PathEscape(s.userID) + "/balance/charge"
	s.headers = make([]map[string]string, s.charges)
	for i := range s.headers {
		s.headers[i] = map[string]string{"Authorization": "Bearer " + bearer, rghttp.IdempotencyKeyHeader: "charge-" + strconv.Itoa(i)}
	}
	return nil
}

// run sends every charge; a charge succeeds with 200 only.
func (s *chargeHerd) run(e *env) work {
	body := map[string]any{"amount": chargeAmount}
	return work{n: s.charges, do: func(ctx context.Context, i int) attempt {
		a, _ := e.api.post(ctx, i, s.path, s.headers[i], body)
		a.ok = a.status == http.StatusOK
		return a
	}}
}

// The balance's invariant: balance == Σ ledger, and the charges applied are exactly those
// answered 200, give or take those whose outcome the run cannot know (5xx, no response).
const (
	balanceSQL = `SELECT balance FROM users WHERE id = ?`
	ledgerSQL  = `SELECT COUNT(*), COALESCE(SUM(amount), 0) FROM balance_ledger WHERE user_id = ?`
)

// invariant reads the balance and the ledger back and checks them against the answers.
func (s *chargeHerd) invariant(ctx context.Context, e *env, attempts []attempt) (invariantResult, error) {
	var balance, ledgerSum int64
	var entries int
	if err := e.db.SQL().QueryRowContext(ctx, gormdb.Bind(e.db.Dialect(), balanceSQL), s.userID).Scan(&balance); err != nil {
		return invariantResult{}, fmt.Errorf("invariant: read balance: %w", err)
	}
	// SUM is numeric/DECIMAL; scanned as text, it is exact.
	var sum string
	if err := e.db.SQL().QueryRowContext(ctx, gormdb.Bind(e.db.Dialect(), ledgerSQL), s.userID).Scan(&entries, &sum); err != nil {
		return invariantResult{}, fmt.Errorf("invariant: read ledger: %w", err)
	}
	ledgerSum, err := strconv.ParseInt(sum, 10, 64)
	if err != nil {
		return invariantResult{}, fmt.Errorf("invariant: ledger sum %q: %w", sum, err)
	}
	answered200, unknown := 0, 0
	for _, a := range attempts {
		switch {
		case a.status == http.StatusOK:
			answered200++
		case a.status == 0, a.status >= http.StatusInternalServerError:
			unknown++ // the charge may or may not have committed
		}
	}
	var violations []string
	if balance != ledgerSum {
		violations = append(violations, fmt.Sprintf("balance %d != Σ ledger %d", balance, ledgerSum))
	}
	applied := entries - 1 // the opening entry
	if applied < answered200 || applied > answered200+unknown {
		violations = append(violations, fmt.Sprintf("%d charges applied, %d answered 200 (%d unknown)", applied, answered200, unknown))
	}
	if want := int64(applied) * chargeAmount; balance != want {
		violations = append(violations, fmt.Sprintf("balance %d != %d applied charges × %d", balance, applied, chargeAmount))
	}
	return invariantResult{
		rows: []invariantRow{
			{label: "db: balance", value: int(balance)},
			{label: "db: Σ ledger", value: int(ledgerSum)},
			{label: "db: charges in the ledger", value: applied},
			{label: "expected: charges answered 200", value: answered200},
		},
		violations: violations,
	}, nil
}

// The ceiling is the seed's charge (commerce.md §6) through database/sql, with the ledger row
// rushgate adds: BEGIN, the balance row FOR UPDATE, UPDATE it, INSERT the ledger entry, COMMIT.
const (
	insertUserSQL    = `INSERT INTO users (id, balance, created_at, updated_at) VALUES (?, 0, ?, ?)`
	lockBalanceSQL   = `SELECT balance FROM users WHERE id = ? FOR UPDATE`
	updateBalanceSQL = `UPDATE users SET balance = ?, updated_at = ? WHERE id = ?`
	insertLedgerSQL  = `INSERT INTO balance_ledger (id, user_id, kind, amount, balance_after, reference, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`
)

// chargeStatements are the charge transaction's statements in one dialect.
type chargeStatements struct {
	lockBalance, updateBalance, insertLedger string
}

// ceiling creates a user with SQL and returns the same charges as bare transactions.
func (s *chargeHerd) ceiling(ctx context.Context, e *env) (work, error) {
	d := e.db.Dialect()
	userID := "ceiling-" + e.runID + "-payer"
	now := time.Now().UTC()
	if _, err := e.db.SQL().ExecContext(ctx, gormdb.Bind(d, insertUserSQL), userID, now, now); err != nil {
		return work{}, fmt.Errorf("ceiling: create user: %w", err)
	}
	if _, err := e.db.SQL().ExecContext(ctx, gormdb.Bind(d, insertLedgerSQL), uuid.NewString(), userID, "OPENING", 0, 0, "ceiling", now); err != nil {
		return work{}, fmt.Errorf("ceiling: open ledger: %w", err)
	}
	stmts := chargeStatements{
		lockBalance:   gormdb.Bind(d, lockBalanceSQL),
		updateBalance: gormdb.Bind(d, updateBalanceSQL),
		insertLedger:  gormdb.Bind(d, insertLedgerSQL),
	}
	return work{n: s.charges, do: func(ctx context.Context, i int) attempt {
		ctx, cancel := context.WithTimeout(ctx, e.timeout)
		defer cancel()
		start := time.Now()
		err := chargeTx(ctx, e.db.SQL(), stmts, userID, "charge-"+strconv.Itoa(i))
		return attempt{latency: time.Since(start), ok: err == nil, err: err}
	}}, nil
}

// chargeTx adds chargeAmount to userID's balance and writes its ledger entry, in one
// transaction under the balance row's lock.
func chargeTx(ctx context.Context, db *sql.DB, stmts chargeStatements, userID, reference string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op once committed
	var balance int64
	if err := tx.QueryRowContext(ctx, stmts.lockBalance, userID).Scan(&balance); err != nil {
		return fmt.Errorf("lock balance: %w", err)
	}
	balance += chargeAmount
	now := time.Now().UTC()
	if _, err := tx.ExecContext(ctx, stmts.updateBalance, balance, now, userID); err != nil {
		return fmt.Errorf("update balance: %w", err)
	}
	if _, err := tx.ExecContext(ctx, stmts.insertLedger, uuid.NewString(), userID, "CHARGE", chargeAmount, balance, reference, now); err != nil {
		return fmt.Errorf("insert ledger entry: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
