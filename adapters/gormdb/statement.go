package gormdb

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"gorm.io/gorm"
	"gorm.io/plugin/dbresolver"
)

// The statements on the hot paths (a join's lock, count update, member insert and membership
// check, and the idempotency markers' reads and writes) are written by hand and run on the
// database/sql handle under GORM, through exec and query: GORM's callbacks, statement builder
// and reflective scanning cost more than the statement itself takes on a local server. Errors
// still go through translate.

// conn returns the handle a hand-written statement runs on, and the context to run it with:
// the transaction ctx carries, or else the pool with the call bounded by TxTimeout, as session
// does; for a read a replica may serve (see readsReplica), the replica dbresolver picks. Call
// the returned function when the call is done.
func (db *DB) conn(ctx context.Context) (gorm.ConnPool, context.Context, context.CancelFunc) {
	if tx, ok := db.transaction(ctx); ok {
		return tx.Statement.ConnPool, ctx, func() {}
	}
	ctx, cancel := db.bounded(ctx)
	if db.readsReplica(ctx) {
		return db.readGorm.WithContext(ctx).Clauses(dbresolver.Read).Statement.ConnPool, ctx, cancel
	}
	return db.sql, ctx, cancel
}

// exec runs a hand-written statement on conn's handle and returns how many rows it affected.
// Errors go through translate with m.
func (db *DB) exec(ctx context.Context, m errorMeanings, query string, args ...any) (int64, error) {
	conn, ctx, done := db.conn(ctx)
	defer done()
	return db.execOn(ctx, conn, m, query, args...)
}

// execOn is exec on conn.
func (db *DB) execOn(ctx context.Context, conn gorm.ConnPool, m errorMeanings, query string, args ...any) (int64, error) {
	ctx, end := db.traceStatement(ctx, m, query)
	res, err := conn.ExecContext(ctx, query, args...)
	end(err)
	if err != nil {
		return 0, translate(err, m)
	}
	affected, err := res.RowsAffected()
	if err != nil {
		return 0, translate(err, m)
	}
	return affected, nil
}

// query runs a hand-written query on conn's handle and calls scan on each row it returns.
// Errors, scan's included, go through translate with m. Outside a transaction it runs again on
// another connection while its connection is lost (rerunIdempotent), so it is for reads, and
// for writes whose rerun stores nothing twice; but not once scan was handed a row, unless an
// enclosing rerunIdempotent reruns the caller as a whole: scan would be handed it again.
func (db *DB) query(ctx context.Context, m errorMeanings, query string, args []any, scan func(*sql.Rows) error) error {
	rerunsHere := !db.rerunsAsAWhole(ctx)
	return db.rerunIdempotent(ctx, func(ctx context.Context) error {
		conn, ctx, done := db.conn(ctx)
		defer done()
		ctx, end := db.traceStatement(ctx, m, query)
		handedOver := false
		err := scanRows(ctx, conn, query, args, func(rows *sql.Rows) error {
			handedOver = true
			return scan(rows)
		})
		end(err)
		if handedOver && rerunsHere && isConnectionLost(err) {
			err = fmt.Errorf("%w: %w", errRowsHandedOver, err)
		}
		return translate(err, m)
	})
}

// scanRows runs query on conn and calls scan on each row it returns.
func scanRows(ctx context.Context, conn gorm.ConnPool, query string, args []any, scan func(*sql.Rows) error) error {
	rows, err := conn.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// queryOne runs a hand-written query for at most one row and calls scan on it; it reports
// whether there was one.
func (db *DB) queryOne(ctx context.Context, m errorMeanings, query string, args []any, scan func(*sql.Rows) error) (bool, error) {
	found := false
	err := db.query(ctx, m, query, args, func(rows *sql.Rows) error {
		found = true
		return scan(rows)
	})
	return found, err
}

// Bind rewrites a statement written with "?" placeholders into the dialect's syntax: MySQL
// takes "?" as written, Postgres wants "$1", "$2", … in order. The statement must not carry a
// "?" inside a literal. The load tool and the tests use it for their own raw SQL.
func Bind(d Dialect, query string) string {
	if d != Postgres {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + strings.Count(query, "?"))
	n := 0
	for _, r := range query {
		if r != '?' {
			b.WriteRune(r)
			continue
		}
		n++
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

// tuples returns rows comma-separated groups of width "?" placeholders, "(?, ?), (?, ?)", for
// a multi-row VALUES list or a row-constructor IN list; one group, tuples(1, n), is a plain IN
// list.
func tuples(rows, width int) string {
	tuple := "(" + strings.Repeat("?, ", width-1) + "?)"
	return strings.Repeat(tuple+", ", rows-1) + tuple
}

// usersAmong returns which of userIDs have a row of table whose column equals id, in one SELECT
// on the table's unique key over column and user_id: a batch's "who is in already" read.
func (db *DB) usersAmong(ctx context.Context, op, table, column, id string, userIDs []string) (map[string]bool, error) {
	found := make(map[string]bool, len(userIDs))
	if len(userIDs) == 0 {
		return found, nil
	}
	query := Bind(db.dialect, "SELECT user_id FROM "+table+" WHERE "+column+" = ? AND user_id IN "+tuples(1, len(userIDs)))
	args := make([]any, 0, 1+len(userIDs))
	args = append(args, id)
	for _, userID := range userIDs {
		args = append(args, userID)
	}
	err := db.query(ctx, errorMeanings{op: op}, query, args, func(rows *sql.Rows) error {
		var userID string
		if err := rows.Scan(&userID); err != nil {
			return err
		}
		found[userID] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}
