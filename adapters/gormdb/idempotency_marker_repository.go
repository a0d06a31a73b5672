package gormdb

import (
	"context"
	"database/sql"
	"time"

	"github.com/rushgate/rushgate/ports"
)

var _ ports.IdempotencyMarkerRepository = (*IdempotencyMarkerRepository)(nil)

// IdempotencyMarkerRepository stores idempotency markers in the idempotency_markers table; it
// implements ports.IdempotencyMarkerRepository. Its statements run in the transaction ctx
// carries, so a marker commits or rolls back with the write it answers.
type IdempotencyMarkerRepository struct {
	db       *DB
	pruneSQL string
}

// NewIdempotencyMarkerRepository returns the idempotency marker repository of db.
func NewIdempotencyMarkerRepository(db *DB) *IdempotencyMarkerRepository {
	return &IdempotencyMarkerRepository{db: db, pruneSQL: Bind(db.dialect, pruneStatement(db.dialect))}
}

// pruneStatement deletes the oldest markers created before a time, at most a limit of them.
// MySQL limits a DELETE directly; Postgres has no DELETE … LIMIT, so it picks the rows' physical
// ids in a subquery.
func pruneStatement(d Dialect) string {
	if d == Postgres {
		return "DELETE FROM idempotency_markers WHERE ctid IN " +
			"(SELECT ctid FROM idempotency_markers WHERE created_at < ? ORDER BY created_at LIMIT ?)"
	}
	return "DELETE FROM idempotency_markers WHERE created_at < ? ORDER BY created_at LIMIT ?"
}

// Find returns the markers stored for keys, read in one SELECT on the primary key.
func (r *IdempotencyMarkerRepository) Find(ctx context.Context, keys []ports.IdempotencyKey) (map[ports.IdempotencyKey]ports.IdempotencyMarker, error) {
	found := make(map[ports.IdempotencyKey]ports.IdempotencyMarker, len(keys))
	if len(keys) == 0 {
		return found, nil
	}
	query := Bind(r.db.dialect, "SELECT scope, idem_key, fingerprint, outcome, body, created_at "+
		"FROM idempotency_markers WHERE (scope, idem_key) IN ("+tuples(len(keys), 2)+")")
	args := make([]any, 0, 2*len(keys))
	for _, key := range keys {
		args = append(args, key.Scope, key.Key)
	}
	err := r.db.query(ctx, errorMeanings{op: "find idempotency markers"}, query, args, func(rows *sql.Rows) error {
		var m ports.IdempotencyMarker
		err := rows.Scan(&m.Key.Scope, &m.Key.Key, &m.Fingerprint, &m.Response.Outcome, &m.Response.Body, &m.CreatedAt)
		if err != nil {
			return err
		}
		m.CreatedAt = m.CreatedAt.UTC()
		found[m.Key] = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

// Save inserts the markers in one multi-row INSERT, all or none; a key that already has a
// marker, even one a concurrent transaction inserted first, fails it with
// ports.ErrMarkerExists. A call carries at most 10,922 markers (six parameters each, and both
// databases take at most 65,535 per statement). In a transaction the INSERT is held back with
// the writes before it (see writebuffer.go): the business write a marker answers and the marker
// then go out with the transaction's next statement or its commit, which answers their errors.
func (r *IdempotencyMarkerRepository) Save(ctx context.Context, markers []ports.IdempotencyMarker) error {
	if len(markers) == 0 {
		return nil
	}
	args := make([]any, 0, 6*len(markers))
	for _, m := range markers {
		body := m.Response.Body
		if body == nil {
			body = []byte{} // the driver would send nil as NULL; the column holds bytes
		}
		args = append(args, m.Key.Scope, m.Key.Key, m.Fingerprint, m.Response.Outcome, body, m.CreatedAt.UTC())
	}
	return r.db.deferWrite(ctx, pendingWrite{
		table:    "idempotency_markers",
		meanings: errorMeanings{op: "save idempotency markers", duplicate: ports.ErrMarkerExists},
		query: "INSERT INTO idempotency_markers (scope, idem_key, fingerprint, outcome, body, created_at) VALUES " +
			tuples(len(markers), 6),
		args: args,
	})
}

// Prune deletes up to limit markers created before the given time, oldest first, and returns
// how many it deleted. A worker calls it repeatedly, so each call stays one short statement.
func (r *IdempotencyMarkerRepository) Prune(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	deleted, err := r.db.exec(ctx, errorMeanings{op: "prune idempotency markers"}, r.pruneSQL, before.UTC(), limit)
	return int(deleted), err
}
