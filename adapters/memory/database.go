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
	"sync"

	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
)

var _ ports.TxRunner = (*Database)(nil)

var (
	errNoTransaction = errors.New("memory: a locking read must run inside InTx")
	errTxEnded       = errors.New("memory: the transaction has already ended")
)

// Database is an in-memory relational store: the committed tables, and a lock manager shared
// by its transactions. Repositories built on one Database see the same data. Rows are stored as
// values, so a caller's *crew.Crew never aliases the store.
type Database struct {
	locks *lockManager

	mu      sync.RWMutex                      // guards the committed tables below
	crews   map[string]crew.Crew              // crew id → crew
	members map[string]map[string]crew.Member // crew id → user id → member
}

// NewDatabase returns an empty database.
func NewDatabase() *Database {
	return &Database{
		locks:   newLockManager(),
		crews:   make(map[string]crew.Crew),
		members: make(map[string]map[string]crew.Member),
	}
}

// memberKey is the unique key (crewId, userId) of a member.
type memberKey struct {
	crewID, userID string
}

// memberWrite is a buffered insert or delete of one member.
type memberWrite struct {
	member  crew.Member
	deleted bool
}

// tx is one transaction: its buffered writes and whether it has ended. Like a database
// connection, it serves one goroutine at a time.
type tx struct {
	db      *Database
	crews   map[string]crew.Crew
	members map[memberKey]memberWrite
	ended   bool
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
	if _, ok := ctx.Value(txKey{d}).(*tx); ok {
		return fn(ctx)
	}
	t := &tx{db: d, crews: make(map[string]crew.Crew), members: make(map[memberKey]memberWrite)}
	committed := false
	defer func() {
		if !committed {
			t.end()
		}
	}()
	if err := fn(context.WithValue(ctx, txKey{d}, t)); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: commit: %w", err)
	}
	t.commit()
	committed = true
	return nil
}

// run executes op in ctx's transaction, or in a transaction of its own (autocommit) when ctx
// carries none. A done context fails the statement, as with a real driver.
func (d *Database) run(ctx context.Context, op func(t *tx) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	if t, ok := ctx.Value(txKey{d}).(*tx); ok {
		if t.ended {
			return errTxEnded
		}
		return op(t)
	}
	return d.InTx(ctx, func(ctx context.Context) error {
		return op(ctx.Value(txKey{d}).(*tx))
	})
}

// lock takes key's row lock for the rest of t.
func (t *tx) lock(ctx context.Context, table string, key any) error {
	return t.db.locks.acquire(ctx, t, rowKey{table: table, key: key})
}

// commit applies t's writes to the committed tables, then releases its locks so that waiters
// see the writes.
func (t *tx) commit() {
	d := t.db
	d.mu.Lock()
	for id, row := range t.crews {
		d.crews[id] = row
	}
	for key, w := range t.members {
		byUser := d.members[key.crewID]
		switch {
		case w.deleted:
			delete(byUser, key.userID)
		case byUser == nil:
			d.members[key.crewID] = map[string]crew.Member{key.userID: w.member}
		default:
			byUser[key.userID] = w.member
		}
	}
	d.mu.Unlock()
	t.end()
}

// end discards t's buffered writes (if not committed) and releases its locks.
func (t *tx) end() {
	t.ended = true
	t.crews, t.members = nil, nil
	t.db.locks.releaseAll(t)
}
