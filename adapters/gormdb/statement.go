package gormdb

import (
	"context"
	"strconv"
	"strings"

	"gorm.io/gorm"
)

// The statements on the hot paths (a join's lock, count update, member insert and membership
// check) are written by hand and run on the database/sql handle under GORM: GORM's callbacks,
// statement builder and reflective scanning cost more than the statement itself takes on a
// local server. Errors still go through translate.

// conn returns the handle a hand-written statement runs on, and the context to run it with:
// the transaction ctx carries, or else the pool with the call bounded by TxTimeout, as session
// does. Call the returned function when the call is done.
func (db *DB) conn(ctx context.Context) (gorm.ConnPool, context.Context, context.CancelFunc) {
	if tx, ok := db.transaction(ctx); ok {
		return tx.Statement.ConnPool, ctx, func() {}
	}
	ctx, cancel := context.WithTimeout(ctx, db.opts.TxTimeout)
	return db.sql, ctx, cancel
}

// bind rewrites a statement written with "?" placeholders into the dialect's syntax: MySQL
// takes "?" as written, Postgres wants "$1", "$2", … in order. The statements here never carry
// a "?" inside a literal.
func bind(d Dialect, query string) string {
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
// a multi-row VALUES list or a row-constructor IN list.
func tuples(rows, width int) string {
	tuple := "(" + strings.Repeat("?, ", width-1) + "?)"
	return strings.Repeat(tuple+", ", rows-1) + tuple
}

// placeholders returns n comma-separated "?" placeholders, for an IN list.
func placeholders(n int) string {
	return strings.Repeat("?, ", n-1) + "?"
}
