package gormdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"gorm.io/gorm"

	"github.com/rushgate/rushgate/ports"
)

var _ ports.TxRunner = (*TxRunner)(nil)

// errNoTransaction is returned by row-locking reads outside TxRunner.InTx, where the lock would
// be released as soon as it was taken.
var errNoTransaction = errors.New("gormdb: row lock requested outside TxRunner.InTx")

// conflictPauseBase is the shortest pause before the first rerun of a transaction aborted by a
// conflict.
const conflictPauseBase = 10 * time.Millisecond

// conflictPause is the pause before rerun attempt+1: conflictPauseBase × 2^(attempt-1) plus as
// much again at random, so two victims do not rerun in step.
func conflictPause(attempt int) time.Duration {
	base := conflictPauseBase << (attempt - 1)
	return base + rand.N(base)
}

// errCommitNotSent marks a commit that failed before its COMMIT went out, sending the writes
// held back for it (writeBuffer): the transaction certainly did not commit.
var errCommitNotSent = errors.New("gormdb: failed before the COMMIT was sent")

// txKey keys the open transaction in a context. It names its DB, so a context carrying a
// transaction of another database is never mistaken for one of this database.
type txKey struct{ db *DB }

// TxRunner runs functions in database transactions; it implements ports.TxRunner.
type TxRunner struct {
	db *DB
}

// NewTxRunner returns the transaction runner of db.
func NewTxRunner(db *DB) *TxRunner { return &TxRunner{db: db} }

// InTx runs fn in one transaction bounded by Options.TxTimeout, passing fn a context that carries
// it. fn's error rolls back and is returned unchanged; nil commits and a failed commit is
// returned. A context that already carries a transaction of this database joins it.
//
// When the database aborts the transaction to break a deadlock or a serialization conflict, InTx
// runs fn again in a new transaction, up to Options.TxAttempts runs in all. When the
// transaction's connection is lost before its COMMIT went out (an operator's
// pg_terminate_backend or KILL CONNECTION, a pooler, proxy or failover dropping connections), it
// runs fn again on another connection, up to once for each connection of the pool
// (Options.MaxOpenConns), as every one may have died. It never reruns once the TxTimeout
// deadline (or the caller's) has passed; fn must therefore have no effect outside the
// transaction that a rerun would repeat. A connection lost during the COMMIT leaves the outcome
// unknown: the transaction may have committed, so it is not run again, and InTx answers
// ports.ErrCommitOutcomeUnknown, for a caller that can read whether it did. Repositories report a
// conflict and a lost connection wrapping ports.ErrUnavailable, so one that outlasts the reruns
// answers 503.
func (r *TxRunner) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return r.inTx(ctx, nil, fn)
}

// readCommitted is Postgres's default isolation level. On MySQL, whose default is REPEATABLE
// READ, it spares a locking read the gap locks around the rows it reads, which would keep other
// transactions from inserting there until it ends.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// inTx is InTx with the transaction begun with opts (nil: the database's defaults). A context
// that already carries a transaction joins it as it is.
func (r *TxRunner) inTx(ctx context.Context, opts *sql.TxOptions, fn func(ctx context.Context) error) error {
	if _, ok := r.db.transaction(ctx); ok {
		return fn(ctx)
	}
	// One deadline for every attempt, so retries never stretch the caller's wait.
	ctx, cancel := context.WithTimeout(ctx, r.db.opts.TxTimeout)
	defer cancel()
	lost := r.db.connectionLosses()
	for conflicts := 0; ; {
		mayHaveCommitted, err := r.attempt(ctx, opts, fn)
		switch {
		case err == nil || ctx.Err() != nil:
			return err
		case !mayHaveCommitted && lost.rerun(err):
		case isTxConflict(err):
			if conflicts++; conflicts >= r.db.opts.TxAttempts {
				return err
			}
			// A rerun that starts at once can take the first row again before the transaction
			// that won is granted it (Postgres does not queue row locks fairly across
			// transactions) and deadlock once more; a short random pause lets the winner
			// finish first.
			select {
			case <-ctx.Done():
				return err
			case <-time.After(conflictPause(conflicts)):
			}
		default:
			return err
		}
	}
}

// connectionLosses counts the runs of one piece of work that lost their connection.
type connectionLosses struct{ seen, limit int }

// connectionLosses allows one rerun for each connection of the pool.
func (db *DB) connectionLosses() *connectionLosses {
	return &connectionLosses{limit: db.opts.MaxOpenConns}
}

// rerun reports whether work that failed with err runs again: its connection was lost, and
// reruns remain. The pool discarded the dead connection; the rerun takes another at once. When
// the database ended them all, the pool may hand out its other dead ones first: up to one rerun
// for each gets past them to a new connection.
func (l *connectionLosses) rerun(err error) bool {
	if !isConnectionLost(err) {
		return false
	}
	l.seen++
	return l.seen <= l.limit
}

// rerunIdempotent runs fn, statements outside a transaction, within one TxTimeout for all its
// runs, and runs it again on another connection while its connection is lost, as InTx does a
// transaction lost before its COMMIT. Inside a transaction, or inside the fn of another
// rerunIdempotent (a read in a raffle entry batch), it runs fn once: InTx, or that call, reruns
// the whole. fn must store nothing twice when run again after a run whose statements reached
// the database: a lone statement whose connection died once it was sent may have run and
// committed (database/sql reruns only one the driver says sent nothing, driver.ErrBadConn), and
// pgx cannot tell a statement sent on a connection the server had already ended from one whose
// connection ended mid-run. A read has no effect: query and read run every one through here. A
// run that fails with errRowsHandedOver is not run again.
func (db *DB) rerunIdempotent(ctx context.Context, fn func(ctx context.Context) error) error {
	if db.rerunsAsAWhole(ctx) {
		return fn(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, db.opts.TxTimeout)
	defer cancel()
	ctx = context.WithValue(ctx, rerunKey{db}, true)
	lost := db.connectionLosses()
	for {
		err := fn(ctx)
		if err == nil || ctx.Err() != nil || errors.Is(err, errRowsHandedOver) || !lost.rerun(err) {
			return err
		}
	}
}

// rerunKey marks a context whose statements a rerunIdempotent call runs, and runs again as a
// whole when their connection is lost.
type rerunKey struct{ db *DB }

// rerunsAsAWhole reports whether ctx's statements run in a transaction of db or in a
// rerunIdempotent call, which run them again as a whole when their connection is lost.
func (db *DB) rerunsAsAWhole(ctx context.Context) bool {
	if _, ok := db.transaction(ctx); ok {
		return true
	}
	_, ok := ctx.Value(rerunKey{db}).(bool)
	return ok
}

// errRowsHandedOver marks a lone read whose connection was lost after its caller was handed
// rows: run again, it would hand them over twice.
var errRowsHandedOver = errors.New("gormdb: connection lost after rows were read")

// attempt runs fn in one transaction begun with opts under ctx's deadline. mayHaveCommitted
// reports a failure once the COMMIT may have reached the database: a failure before it (in
// begin, in fn, in the writes the commit sends first) or one the driver knows sent nothing
// (driver.ErrBadConn) left nothing committed.
func (r *TxRunner) attempt(ctx context.Context, opts *sql.TxOptions, fn func(ctx context.Context) error) (mayHaveCommitted bool, err error) {
	tx, err := r.db.begin(ctx, opts)
	if err != nil {
		return false, translate(err, errorMeanings{op: "begin transaction"})
	}
	committed := false
	defer func() {
		// Also runs when fn panics. A failed rollback leaves nothing to undo: the server drops
		// the transaction with the connection, which is discarded, never pooled.
		if !committed {
			tx.Rollback()
		}
	}()

	if err := fn(context.WithValue(ctx, txKey{r.db}, tx)); err != nil {
		return false, err
	}
	// A transaction that outlived its deadline is not committed, even when database/sql has not
	// yet noticed the deadline and would still let the COMMIT through.
	if err := ctx.Err(); err != nil {
		return false, translate(err, errorMeanings{op: "commit"})
	}
	if err := tx.Commit().Error; err != nil {
		// go-sql-driver answers driver.ErrBadConn only when it wrote nothing. pgx's
		// pgconn.SafeToRetry cannot say so here: a connection that breaks while the COMMIT's
		// answer is read is then closed, and its next read reports "conn closed", safe to retry.
		sent := !errors.Is(err, errCommitNotSent) && !errors.Is(err, driver.ErrBadConn)
		if ctx.Err() != nil {
			// The transaction outlived TxTimeout and was rolled back (by database/sql, or on
			// MySQL with its connection closed); report the timeout rather than its symptom.
			err = errors.Join(ctx.Err(), err)
		} else if sent && isConnectionLost(err) {
			return true, fmt.Errorf("%w: %w", ports.ErrCommitOutcomeUnknown, translate(err, errorMeanings{op: "commit"}))
		}
		return sent, translate(err, errorMeanings{op: "commit"})
	}
	committed = true
	return false, nil
}

// transaction returns the transaction of this database that ctx carries, if any.
func (db *DB) transaction(ctx context.Context) (*gorm.DB, bool) {
	tx, ok := ctx.Value(txKey{db}).(*gorm.DB)
	return tx, ok
}

// bounded returns ctx bounded by one TxTimeout unless it carries a transaction of db or runs in
// rerunIdempotent (which bound it already), for a repository call of several statements: alone,
// each statement would take a TxTimeout of its own, and a slow database would hold the caller
// for their sum.
func (db *DB) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if db.rerunsAsAWhole(ctx) {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, db.opts.TxTimeout)
}

// session returns the handle a repository call runs on: the transaction ctx carries, or else
// the pool with the call bounded by TxTimeout, since a lone statement is a transaction too; the
// replicas' handle for a read a replica may serve (see readsReplica). A lone statement on it
// runs once: a read goes through read instead. Call the returned function when the call is
// done.
func (db *DB) session(ctx context.Context) (*gorm.DB, context.CancelFunc) {
	if tx, ok := db.transaction(ctx); ok {
		return tx.WithContext(ctx), func() {}
	}
	handle := db.gorm
	if db.readsReplica(ctx) {
		handle = db.readGorm
	}
	ctx, cancel := db.bounded(ctx)
	return handle.WithContext(ctx), cancel
}

// read runs fn, a read through GORM, on the session ctx calls for; outside a transaction it
// runs fn again on another connection while its connection is lost (rerunIdempotent). GORM
// fills fn's destination anew on each run.
func (db *DB) read(ctx context.Context, fn func(s *gorm.DB) error) error {
	return db.rerunIdempotent(ctx, func(ctx context.Context) error {
		s, done := db.session(ctx)
		defer done()
		return fn(s)
	})
}
