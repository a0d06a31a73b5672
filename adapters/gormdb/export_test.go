package gormdb

import "context"

// Exec runs a raw statement ("?" placeholders on both dialects) the way the repositories do: on
// the transaction ctx carries, else on the pool. Its error goes through translate.
func Exec(ctx context.Context, db *DB, query string, args ...any) error {
	s, done := db.session(ctx)
	defer done()
	return translate(s.Exec(query, args...).Error, errorMeanings{op: "exec"})
}

// Translate is translate for an operation with no domain meanings.
func Translate(err error) error { return translate(err, errorMeanings{op: "test"}) }

// ErrCheckViolation is the error a CHECK constraint's refusal maps to.
var ErrCheckViolation = errCheckViolation
