package gormdb

import (
	"context"
	"database/sql"
	"fmt"
	"net"
)

// WithDial returns opts whose connections are opened with dial.
func WithDial(opts Options, dial func(ctx context.Context, network, addr string) (net.Conn, error)) Options {
	opts.dial = dial
	return opts
}

// Exec runs a raw statement ("?" placeholders on both dialects) the way the repositories do: on
// the transaction ctx carries, else on the pool. Its error goes through translate.
func Exec(ctx context.Context, db *DB, query string, args ...any) error {
	s, done := db.session(ctx)
	defer done()
	return translate(s.Exec(query, args...).Error, errorMeanings{op: "exec"})
}

// Query runs a hand-written read the way the repositories do (query), scan called on each row.
func Query(ctx context.Context, db *DB, query string, args []any, scan func(*sql.Rows) error) error {
	return db.query(ctx, errorMeanings{op: "query"}, query, args, scan)
}

// Translate is translate for an operation with no domain meanings.
func Translate(err error) error { return translate(err, errorMeanings{op: "test"}) }

// ErrCheckViolation is the error a CHECK constraint's refusal maps to.
var ErrCheckViolation = errCheckViolation

// ErrReadOnly is the error a write a read-only database refused maps to, with
// ports.ErrUnavailable.
var ErrReadOnly = errReadOnly

// MigrateTo brings db's migrations up or down to version (0: none), as a database upgraded or
// rolled back to that version has them.
func MigrateTo(ctx context.Context, db *DB, version int64) error {
	provider, err := migrationProvider(db.dialect, db.sql)
	if err != nil {
		return err
	}
	current, err := provider.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("read the migration version: %w", err)
	}
	switch {
	case version < current:
		_, err = provider.DownTo(ctx, version)
	case version > current:
		_, err = provider.UpTo(ctx, version)
	}
	if err != nil {
		return fmt.Errorf("migrate to %d: %w", version, err)
	}
	return nil
}

// InClaimTx runs fn in a transaction opened as Claim opens its own.
func (r *OutboxRepository) InClaimTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return r.inClaimTx(ctx, fn)
}

// ConnectionID answers the server's id of the connection the transaction ctx carries runs on:
// its backend pid on Postgres, CONNECTION_ID() on MySQL.
func ConnectionID(ctx context.Context, db *DB) (int64, error) {
	s, done := db.session(ctx)
	defer done()
	query := "SELECT pg_backend_pid()"
	if db.dialect == MySQL {
		query = "SELECT CONNECTION_ID()"
	}
	var id int64
	err := s.Raw(query).Scan(&id).Error
	return id, translate(err, errorMeanings{op: "read the connection id"})
}
