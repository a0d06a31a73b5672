package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/adapters/gormdb"
)

// The coupon herd: --users distinct users each ask once for a coupon of quantity --capacity,
// one POST /api/coupons/{id}/issue each. It is judged on how fast the coupons are handed out
// (grants per second until the last one, against the seed's optimistic transaction's), on
// nobody being refused COUPON_ISSUE_FAILED while coupons remained, and on zero 5xx.

// Answer codes the coupon herd reads.
const (
	codeIssueFailed   = "COUPON_ISSUE_FAILED"
	codeSoldOut       = "COUPON_SOLD_OUT"
	codeAlreadyIssued = "ALREADY_ISSUED"
)

// newCouponHerd is --users users for ONE coupon of --capacity.
func newCouponHerd(cfg config) (scenario, error) {
	if cfg.capacity < 1 || cfg.capacity > maxCapacity {
		return nil, fmt.Errorf("coupon-herd: --capacity must be 1..%d", maxCapacity)
	}
	return &couponHerd{users: cfg.users, quantity: cfg.capacity}, nil
}

// couponHerd is users racing for one coupon of quantity.
type couponHerd struct {
	users, quantity int

	// Set by prepare.
	couponID string
	issues   []joinRequest
}

var _ scenario = (*couponHerd)(nil)

func (s *couponHerd) shape() string {
	return fmt.Sprintf("%d users → 1 coupon of %d", s.users, s.quantity)
}

func (s *couponHerd) targets(gormdb.Dialect) []target {
	grants := min(s.users, s.quantity)
	return []target{
		{measure: measureGrantRateRatio, bound: atLeast, limit: 1.5, concurrency: 64},
		{measure: measureEarlyRefusals, bound: atMost, limit: 0},
		{measure: measureTimeToFill, grants: grants},
		{measure: measureP99},
		{measure: measure429},
	}
}

// prepare creates the coupon through the API and mints one token per user.
func (s *couponHerd) prepare(ctx context.Context, e *env) error {
	admin, err := e.adminToken()
	if err != nil {
		return fmt.Errorf("mint admin token: %w", err)
	}
	coupon, err := createByAdmin(ctx, e.api, 0, admin, "/admin/coupons", map[string]any{
		"name": "rushgate-load " + e.runID, "discountRate": 10, "totalQuantity": s.quantity,
		"expiresAt": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339),
	})
	if err != nil {
		return fmt.Errorf("create coupon: %w", err)
	}
	s.couponID = coupon.ID
	s.issues = make([]joinRequest, s.users)
	for i := range s.issues {
		user := e.userID(i)
		bearer, err := e.userToken(user)
		if err != nil {
			return fmt.Errorf("mint token for %s: %w", user, err)
		}
		s.issues[i] = joinRequest{
			userID:  user,
			path:    "/api/coupons/" + url.PathEscape(s.couponID) + "/issue",
			headers: map[string]string{"Authorization": "Bearer " + bearer},
		}
	}
	return nil
}

// run sends every user's issue; an issue succeeds with 201 only.
func (s *couponHerd) run(e *env) work {
	return work{n: s.users, do: func(ctx context.Context, i int) attempt {
		r := s.issues[i]
		a, _ := e.api.post(ctx, i, r.path, r.headers, nil)
		a.ok = a.status == http.StatusCreated
		return a
	}}
}

// The coupon's invariant: issued == count(user_coupons) <= total, no user twice; the
// holders are exactly the users answered 201, give or take those whose outcome the run cannot
// know (5xx, no response); COUPON_SOLD_OUT only once every coupon is issued.
const (
	couponCounterSQL = `SELECT issued_quantity, total_quantity FROM coupons WHERE id = ?`
	couponHoldersSQL = `SELECT user_id FROM user_coupons WHERE coupon_id = ?`
)

// invariant reads the coupon and its holders back and checks them against the answers.
func (s *couponHerd) invariant(ctx context.Context, e *env, attempts []attempt) (invariantResult, error) {
	var issued, total int
	q := gormdb.Bind(e.db.Dialect(), couponCounterSQL)
	if err := e.db.SQL().QueryRowContext(ctx, q, s.couponID).Scan(&issued, &total); err != nil {
		return invariantResult{}, fmt.Errorf("invariant: read coupon: %w", err)
	}
	holders, err := readUserIDs(ctx, e.db, couponHoldersSQL, s.couponID)
	if err != nil {
		return invariantResult{}, fmt.Errorf("invariant: read holders: %w", err)
	}
	held := make(map[string]bool, len(holders))
	var violations []string
	for _, user := range holders {
		if held[user] {
			violations = append(violations, fmt.Sprintf("%s holds the coupon twice", user))
		}
		held[user] = true
	}
	if issued != len(holders) || issued > total {
		violations = append(violations, fmt.Sprintf("issued %d, user coupons %d, total %d", issued, len(holders), total))
	}
	answered201, soldOut := 0, 0
	for i, a := range attempts {
		user := s.issues[i].userID
		switch {
		case a.status == http.StatusCreated:
			answered201++
			if !held[user] {
				violations = append(violations, fmt.Sprintf("%s was answered 201 but holds no coupon", user))
			}
		case a.status >= http.StatusBadRequest && a.status < http.StatusInternalServerError && held[user]:
			violations = append(violations, fmt.Sprintf("%s was answered %d %s but holds a coupon", user, a.status, a.code))
		}
		if a.code == codeSoldOut {
			soldOut++
		}
	}
	if soldOut > 0 && issued < total {
		violations = append(violations, fmt.Sprintf("%d users heard COUPON_SOLD_OUT with %d of %d issued", soldOut, issued, total))
	}
	return invariantResult{
		rows: []invariantRow{
			{label: "db: issued", value: issued},
			{label: "db: count(user_coupons)", value: len(holders)},
			{label: "db: count(distinct user_id)", value: len(held)},
			{label: "expected: users answered 201", value: answered201},
		},
		violations: violations,
	}, nil
}

// readUserIDs runs query (one ? for id) and returns the user_id column.
func readUserIDs(ctx context.Context, db *gormdb.DB, query, id string) ([]string, error) {
	rows, err := db.SQL().QueryContext(ctx, gormdb.Bind(db.Dialect(), query), id)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }() // rows.Err below reports what matters
	var users []string
	for rows.Next() {
		var user string
		if err := rows.Scan(&user); err != nil {
			return nil, err
		}
		users = append(users, user)
	}
	return users, rows.Err()
}

// The ceiling is the seed's issue (commerce.md §7) through database/sql: read the coupon
// (sold out?), count the user's coupons (already issued?), then BEGIN, the optimistic UPDATE,
// 0 rows ⇒ ROLLBACK and COUPON_ISSUE_FAILED, else INSERT the user coupon and COMMIT. No retry:
// that is the seed's.
const (
	insertCouponSQL     = `INSERT INTO coupons (id, name, discount_rate, total_quantity, issued_quantity, version, expires_at, created_at) VALUES (?, ?, 10, ?, 0, 0, ?, ?)`
	readCouponSQL       = `SELECT issued_quantity, total_quantity, version FROM coupons WHERE id = ?`
	countHeldSQL        = `SELECT COUNT(*) FROM user_coupons WHERE user_id = ? AND coupon_id = ?`
	addIssuedSQL        = `UPDATE coupons SET issued_quantity = issued_quantity + 1, version = version + 1 WHERE id = ? AND version = ? AND issued_quantity < total_quantity`
	insertUserCouponSQL = `INSERT INTO user_coupons (id, user_id, coupon_id, status, issued_at) VALUES (?, ?, ?, 'AVAILABLE', ?)`
)

// issueStatements are the seed's issue statements in one dialect.
type issueStatements struct {
	readCoupon, countHeld, addIssued, insertUserCoupon string
}

func newIssueStatements(d gormdb.Dialect) issueStatements {
	return issueStatements{
		readCoupon:       gormdb.Bind(d, readCouponSQL),
		countHeld:        gormdb.Bind(d, countHeldSQL),
		addIssued:        gormdb.Bind(d, addIssuedSQL),
		insertUserCoupon: gormdb.Bind(d, insertUserCouponSQL),
	}
}

// ceiling creates the same coupon with SQL and returns the same issues as the seed's flow.
func (s *couponHerd) ceiling(ctx context.Context, e *env) (work, error) {
	dialect := e.db.Dialect()
	couponID := uuid.NewString()
	now := time.Now().UTC()
	_, err := e.db.SQL().ExecContext(ctx, gormdb.Bind(dialect, insertCouponSQL), couponID,
		"rushgate-load ceiling "+e.runID, s.quantity, now.Add(24*time.Hour), now)
	if err != nil {
		return work{}, fmt.Errorf("ceiling: create coupon: %w", err)
	}
	stmts := newIssueStatements(dialect)
	return work{n: s.users, do: func(ctx context.Context, i int) attempt {
		ctx, cancel := context.WithTimeout(ctx, e.timeout)
		defer cancel()
		start := time.Now()
		code, err := issueTx(ctx, e.db.SQL(), stmts, couponID, fmt.Sprintf("ceiling-%s-%d", e.runID, i))
		return attempt{latency: time.Since(start), ok: code == "" && err == nil, code: code, err: err}
	}}, nil
}

// issueTx is the seed's issue of couponID to userID; it returns the refusal's code ("" when
// issued) or a database failure.
func issueTx(ctx context.Context, db *sql.DB, stmts issueStatements, couponID, userID string) (string, error) {
	var issued, total int
	var version int64
	if err := db.QueryRowContext(ctx, stmts.readCoupon, couponID).Scan(&issued, &total, &version); err != nil {
		return "", fmt.Errorf("read coupon: %w", err)
	}
	if issued >= total {
		return codeSoldOut, nil
	}
	var held int
	if err := db.QueryRowContext(ctx, stmts.countHeld, userID, couponID).Scan(&held); err != nil {
		return "", fmt.Errorf("count user coupons: %w", err)
	}
	if held > 0 {
		return codeAlreadyIssued, nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op once committed
	res, err := tx.ExecContext(ctx, stmts.addIssued, couponID, version)
	if err != nil {
		return "", fmt.Errorf("add issued: %w", err)
	}
	updated, err := res.RowsAffected()
	if err != nil {
		return "", fmt.Errorf("add issued: %w", err)
	}
	if updated == 0 {
		return codeIssueFailed, nil
	}
	if _, err := tx.ExecContext(ctx, stmts.insertUserCoupon, uuid.NewString(), userID, couponID, time.Now().UTC()); err != nil {
		return "", fmt.Errorf("insert user coupon: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("commit: %w", err)
	}
	return "", nil
}
