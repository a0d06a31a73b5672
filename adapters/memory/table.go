package memory

import (
	"context"
	"errors"
	"fmt"
)

// errDuplicateKey is a primary-key violation, like inserting a crew id twice. Repositories
// translate it into their port's error.
var errDuplicateKey = errors.New("memory: duplicate key")

// table is one relation of a Database, declared once by its aggregate with its primary key: the
// committed rows, and what each open transaction has written but not yet committed.
//
// Every method works as transaction t sees the table: its own buffered writes first, else the
// committed rows (READ COMMITTED). Writes and locking reads lock the row's key until t ends,
// as Postgres and InnoDB do, so a concurrent writer of the same key waits and then sees the
// outcome; a key that does not exist yet is locked too, which is how a UNIQUE index makes a
// concurrent duplicate insert wait and then fail. Rows are stored as values: a V holding a
// slice or pointer must be cloned by its repository on the way in and out.
type table[K comparable, V any] struct {
	db   *Database
	name string // names the table's row locks in errors
	key  func(V) K
	// partition groups rows so that a scan of one group, like a read through a non-unique
	// index, does not visit the whole table.
	partition func(K) string
	rows      map[string]map[K]V // partition → key → committed row; guarded by db.mu
}

// tableDecl is a table every Database has, declared once at package level by the file of the
// aggregate that owns it; in finds a Database's rows of it.
type tableDecl[K comparable, V any] struct{ index int }

// declaredTables builds every declared table on a new Database, in declaration order.
var declaredTables []func(d *Database) any

// declareTable declares a table whose rows are identified by key.
func declareTable[K comparable, V any](name string, key func(V) K) tableDecl[K, V] {
	return declarePartitionedTable(name, key, func(K) string { return "" })
}

// declarePartitionedTable declares a table whose rows are also grouped by partition, for
// rowsIn.
func declarePartitionedTable[K comparable, V any](name string, key func(V) K, partition func(K) string) tableDecl[K, V] {
	declaredTables = append(declaredTables, func(d *Database) any {
		return &table[K, V]{db: d, name: name, key: key, partition: partition, rows: make(map[string]map[K]V)}
	})
	return tableDecl[K, V]{index: len(declaredTables) - 1}
}

// in is d's table.
func (decl tableDecl[K, V]) in(d *Database) *table[K, V] { return d.tables[decl.index].(*table[K, V]) }

// rowWrite is a buffered insert, update or delete of one row.
type rowWrite[V any] struct {
	row     V
	deleted bool
}

// tableWrites is one transaction's buffered writes to one table.
type tableWrites[K comparable, V any] struct {
	table *table[K, V]
	rows  map[K]rowWrite[V]
}

func (w *tableWrites[K, V]) apply() {
	tb := w.table
	for k, write := range w.rows {
		p := tb.partition(k)
		switch byKey := tb.rows[p]; {
		case write.deleted:
			delete(byKey, k)
			if len(byKey) == 0 {
				delete(tb.rows, p)
			}
		case byKey == nil:
			tb.rows[p] = map[K]V{k: write.row}
		default:
			byKey[k] = write.row
		}
	}
}

// pending returns t's buffered writes to tb; nil when there are none.
func (tb *table[K, V]) pending(t *tx) map[K]rowWrite[V] {
	if w, ok := t.writes[tb].(*tableWrites[K, V]); ok {
		return w.rows
	}
	return nil
}

// buffer records write for key in t, to be applied when t commits.
func (tb *table[K, V]) buffer(t *tx, k K, write rowWrite[V]) {
	w, ok := t.writes[tb].(*tableWrites[K, V])
	if !ok {
		w = &tableWrites[K, V]{table: tb, rows: make(map[K]rowWrite[V])}
		t.writes[tb] = w
	}
	w.rows[k] = write
}

// lock takes the row lock of k for the rest of t.
func (tb *table[K, V]) lock(ctx context.Context, t *tx, k K) error {
	return tb.db.locks.acquire(ctx, t, rowKey{table: tb.name, key: k})
}

// get returns k's row as t sees it.
func (tb *table[K, V]) get(t *tx, k K) (V, bool) {
	if w, ok := tb.pending(t)[k]; ok {
		return w.row, !w.deleted
	}
	tb.db.mu.RLock()
	defer tb.db.mu.RUnlock()
	row, ok := tb.rows[tb.partition(k)][k]
	return row, ok
}

// getForUpdate locks k's row, waiting while another transaction holds it, then returns it as
// t sees it, so the latest committed version.
func (tb *table[K, V]) getForUpdate(ctx context.Context, t *tx, k K) (V, bool, error) {
	if err := tb.lock(ctx, t, k); err != nil {
		var zero V
		return zero, false, err
	}
	row, ok := tb.get(t, k)
	return row, ok, nil
}

// insert adds rows in one statement, all or none: if any key exists, or appears twice among
// rows, it returns an error wrapping errDuplicateKey and inserts nothing. It locks every key
// first, so a key a concurrent transaction has inserted but not committed makes it wait and
// then fail if that transaction commits.
func (tb *table[K, V]) insert(ctx context.Context, t *tx, rows ...V) error {
	keys := make([]K, len(rows))
	for i, row := range rows {
		keys[i] = tb.key(row)
		if err := tb.lock(ctx, t, keys[i]); err != nil {
			return err
		}
	}
	inserting := make(map[K]bool, len(keys))
	for _, k := range keys {
		if _, exists := tb.get(t, k); exists || inserting[k] {
			return fmt.Errorf("memory: insert into %s: key %v: %w", tb.name, k, errDuplicateKey)
		}
		inserting[k] = true
	}
	for i, row := range rows {
		tb.buffer(t, keys[i], rowWrite[V]{row: row})
	}
	return nil
}

// put writes row, inserting or replacing it, under its row lock.
func (tb *table[K, V]) put(ctx context.Context, t *tx, row V) error {
	k := tb.key(row)
	if err := tb.lock(ctx, t, k); err != nil {
		return err
	}
	tb.buffer(t, k, rowWrite[V]{row: row})
	return nil
}

// delete removes k's row under its row lock and reports whether there was one.
func (tb *table[K, V]) delete(ctx context.Context, t *tx, k K) (bool, error) {
	if err := tb.lock(ctx, t, k); err != nil {
		return false, err
	}
	if _, exists := tb.get(t, k); !exists {
		return false, nil
	}
	tb.buffer(t, k, rowWrite[V]{deleted: true})
	return true, nil
}

// rowsIn returns the rows of partition p as t sees them, in no particular order.
func (tb *table[K, V]) rowsIn(t *tx, p string) []V {
	pending := tb.pending(t)
	tb.db.mu.RLock()
	committed := tb.rows[p]
	rows := make([]V, 0, len(committed))
	for k, row := range committed {
		if _, overwritten := pending[k]; !overwritten {
			rows = append(rows, row)
		}
	}
	tb.db.mu.RUnlock()
	for k, w := range pending {
		if !w.deleted && tb.partition(k) == p {
			rows = append(rows, w.row)
		}
	}
	return rows
}

// filter returns the rows of the whole table for which keep is true, as t sees them, in no
// particular order.
func (tb *table[K, V]) filter(t *tx, keep func(V) bool) []V {
	pending := tb.pending(t)
	var rows []V
	tb.db.mu.RLock()
	for _, byKey := range tb.rows {
		for k, row := range byKey {
			if _, overwritten := pending[k]; !overwritten && keep(row) {
				rows = append(rows, row)
			}
		}
	}
	tb.db.mu.RUnlock()
	for _, w := range pending {
		if !w.deleted && keep(w.row) {
			rows = append(rows, w.row)
		}
	}
	return rows
}

// tryLock takes the row lock of k for the rest of t unless another transaction holds it, and
// reports whether t holds it: a row a SKIP LOCKED read passes over when it does not.
func (tb *table[K, V]) tryLock(t *tx, k K) bool {
	return tb.db.locks.tryAcquire(t, rowKey{table: tb.name, key: k})
}
