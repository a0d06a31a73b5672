package memory

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/rushgate/rushgate/ports"
)

var _ ports.IdempotencyMarkerRepository = (*IdempotencyMarkerRepository)(nil)

func markerKeyOf(m ports.IdempotencyMarker) ports.IdempotencyKey { return m.Key }

var markersTable = declareTable("idempotency_markers", markerKeyOf)

// cloneMarker copies m's body, so that neither the caller nor the store can change the
// other's marker.
func cloneMarker(m ports.IdempotencyMarker) ports.IdempotencyMarker {
	m.Response.Body = bytes.Clone(m.Response.Body)
	return m
}

// IdempotencyMarkerRepository stores idempotency markers in a Database, so a marker commits or
// rolls back with the business write of the same transaction.
type IdempotencyMarkerRepository struct {
	db *Database
}

// NewIdempotencyMarkerRepository returns an IdempotencyMarkerRepository on d.
func NewIdempotencyMarkerRepository(d *Database) *IdempotencyMarkerRepository {
	return &IdempotencyMarkerRepository{db: d}
}

// Find returns the markers stored for keys as ctx's transaction sees them.
func (r *IdempotencyMarkerRepository) Find(ctx context.Context, keys []ports.IdempotencyKey) (map[ports.IdempotencyKey]ports.IdempotencyMarker, error) {
	found := make(map[ports.IdempotencyKey]ports.IdempotencyMarker)
	err := r.db.run(ctx, func(t *tx) error {
		for _, k := range keys {
			if m, ok := markersTable.in(r.db).get(t, k); ok {
				found[k] = cloneMarker(m)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

// Save inserts markers in one statement, all or none. Like a UNIQUE(scope, key) index, it
// locks each key for the rest of the transaction, so a concurrent Save of the same key waits
// and then fails with ports.ErrMarkerExists if the other one commits.
func (r *IdempotencyMarkerRepository) Save(ctx context.Context, markers []ports.IdempotencyMarker) error {
	if len(markers) == 0 {
		return nil
	}
	rows := make([]ports.IdempotencyMarker, len(markers))
	for i, m := range markers {
		rows[i] = cloneMarker(m)
	}
	return r.db.run(ctx, func(t *tx) error {
		err := markersTable.in(r.db).insert(ctx, t, rows...)
		if errors.Is(err, errDuplicateKey) {
			return ports.ErrMarkerExists
		}
		return err
	})
}

// Prune deletes up to limit markers created before the given time, oldest first, and returns
// how many it deleted.
func (r *IdempotencyMarkerRepository) Prune(ctx context.Context, before time.Time, limit int) (int, error) {
	var deleted int
	err := r.db.run(ctx, func(t *tx) error {
		old := markersTable.in(r.db).filter(t, func(m ports.IdempotencyMarker) bool { return m.CreatedAt.Before(before) })
		slices.SortFunc(old, func(a, b ports.IdempotencyMarker) int { return a.CreatedAt.Compare(b.CreatedAt) })
		for _, m := range old[:min(max(limit, 0), len(old))] {
			// A concurrent transaction may have deleted it meanwhile; only rows this one
			// removed count.
			ok, err := markersTable.in(r.db).delete(ctx, t, m.Key)
			if err != nil {
				return err
			}
			if ok {
				deleted++
			}
		}
		return nil
	})
	return deleted, err
}
