package gormdb

import (
	"context"
	"fmt"
)

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

// MigrateTo applies db's migrations up to and including version, as a database last upgraded to
// that version has them.
func MigrateTo(ctx context.Context, db *DB, version int64) error {
	provider, err := migrationProvider(db)
	if err != nil {
		return err
	}
	if _, err := provider.UpTo(ctx, version); err != nil {
		return fmt.Errorf("migrate to %d: %w", version, err)
	}
	return nil
}

// MigrateDownTo rolls db's migrations back until version is the latest applied (0: none).
func MigrateDownTo(ctx context.Context, db *DB, version int64) error {
	provider, err := migrationProvider(db)
	if err != nil {
		return err
	}
	if _, err := provider.DownTo(ctx, version); err != nil {
		return fmt.Errorf("migrate down to %d: %w", version, err)
	}
	return nil
}

// InClaimTx runs fn in a transaction opened as Claim opens its own.
func (r *OutboxRepository) InClaimTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return r.inClaimTx(ctx, fn)
}
