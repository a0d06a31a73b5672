// Package memory implements every port in memory with the semantics of the real adapters:
// transactions that buffer their writes until commit, row locks held until the transaction
// ends, unique keys that make a concurrent duplicate wait and then fail, TTLs and leases read
// from a ports.Clock. Use-case tests that pass here mean what they would mean on Postgres,
// MySQL and Redis, and `rushgate serve` uses these adapters when no database is configured.
package memory

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/rushgate/rushgate/ports"
)

var _ ports.TxRunner = (*Database)(nil)

var (
	errNoTransaction = errors.New("memory: a locking read must run inside InTx")
	errTxEnded       = errors.New("memory: the transaction has already ended")
)

// Database is an in-memory relational store: its tables, and a lock manager shared by its
// transactions. Repositories built on one Database see the same data. Rows are stored as
// values, so a caller's *crew.Crew never aliases the store.
//
// Statements yield the processor before and after they run, and commits before, standing in
// for the round trips to a server during which other transactions proceed: concurrent
// transactions interleave between statements as they do on a real database. Without that, a
// transaction would usually run start to finish unopposed, and a missing or early-released row
// lock would go unnoticed by concurrency tests.
type Database struct {
	locks *lockManager

	// mu guards the committed rows of every table, so that a commit touching several tables
	// becomes visible all at once.
	mu sync.RWMutex
	// tables are the rows of every declared table, by declaration (tableDecl.in).
	tables []any
}

// NewDatabase returns an empty database with every declared table.
func NewDatabase() *Database {
	d := &Database{locks: newLockManager(), tables: make([]any, len(declaredTables))}
	for i, declare := range declaredTables {
		d.tables[i] = declare(d)
	}
	return d
}

// tx is one transaction: its buffered writes per table and whether it has ended. Like a
// database connection, it serves one goroutine at a time.
type tx struct {
	db     *Database
	writes map[any]pendingWrites // table → its writes, applied at commit
	ended  bool
}

// pendingWrites is one transaction's buffered writes to one table.
type pendingWrites interface {
	// apply makes the writes committed rows; the caller holds the Database's mu.
	apply()
}

// txKey carries a Database's transaction in a context; keying by the Database keeps two
// databases' transactions apart.
type txKey struct{ db *Database }

// InTx runs fn in one transaction carried by the context passed to fn. fn's writes become
// visible to others only when it returns nil and the commit succeeds; an error or a panic rolls
// them back (the panic is re-raised). A context already carrying this database's transaction
// joins it. Row locks taken inside are held until InTx returns. A context that ends before the
// commit fails it, as a driver does.
func (d *Database) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if _, ok := d.txOf(ctx); ok {
		return fn(ctx)
	}
	t := &tx{db: d, writes: make(map[any]pendingWrites)}
	committed := false
	defer func() {
		if !committed {
			t.end()
		}
	}()
	if err := fn(context.WithValue(ctx, txKey{d}, t)); err != nil {
		return err
	}
	runtime.Gosched() // COMMIT is a statement too.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: commit: %w", err)
	}
	t.commit()
	committed = true
	return nil
}

// txOf returns the transaction of d that ctx carries, if any.
func (d *Database) txOf(ctx context.Context) (*tx, bool) {
	t, ok := ctx.Value(txKey{d}).(*tx)
	return t, ok
}

// run executes one statement, op, in ctx's transaction, or in a transaction of its own
// (autocommit) when ctx carries none. A done context fails the statement, as with a real driver.
func (d *Database) run(ctx context.Context, op func(t *tx) error) error {
	runtime.Gosched()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	if t, ok := d.txOf(ctx); ok {
		if t.ended {
			return errTxEnded
		}
		defer runtime.Gosched()
		return op(t)
	}
	// The commit yields after the statement.
	return d.InTx(ctx, func(ctx context.Context) error {
		t, _ := d.txOf(ctx)
		return op(t)
	})
}

// runInTx is run for statements that take row locks a caller relies on afterwards, such as
// SELECT ... FOR UPDATE: outside InTx the lock would end with the statement, so they fail.
func (d *Database) runInTx(ctx context.Context, op func(t *tx) error) error {
	if _, ok := d.txOf(ctx); !ok {
		return errNoTransaction
	}
	return d.run(ctx, op)
}

// commit applies t's writes to the committed tables, then releases its locks so that waiters
// see the writes.
func (t *tx) commit() {
	t.db.mu.Lock()
	for _, w := range t.writes {
		w.apply()
	}
	t.db.mu.Unlock()
	t.end()
}

// end discards t's buffered writes (if not committed) and releases its locks.
func (t *tx) end() {
	t.ended = true
	t.writes = nil
	t.db.locks.releaseAll(t)
}
