package gormdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/rushgate/rushgate/ports"
)

// A transaction's connection holds back the writes a repository defers (deferWrite) and sends
// them together, as one statement, just before the transaction's next statement or its commit.
// A crew join's member rows, member count and idempotency markers then cost one round trip
// instead of three. On Postgres the writes go out as one statement of data-modifying CTEs; on
// MySQL as one multi-statement (the driver interpolates the values, so no prepared statement
// is involved), which also carries the next statement when that is a query (QueryContext):
// crew joins sharing a transaction then cost one round trip each, the next crew's FOR UPDATE
// carrying the previous join's writes.
//
// On MySQL the transaction's BEGIN and COMMIT ride the same way: the transaction holds a
// connection of the pool, its BEGIN goes in front of its first statement and its COMMIT behind
// the writes its commit sends, so a transaction of one locking read and its writes costs two
// round trips instead of four. Postgres's transaction is database/sql's, begun at once: pgx
// sends one statement at a time. A locking read of a row the transaction does not hold yet
// carries the writes there too, as data-modifying CTEs in front of it (queryOneLocking): the next
// crew's FOR UPDATE then brings the previous join's writes, one round trip for both.
//
// A deferred write's error comes back from the statement or commit that sent it, translated with
// the meanings of the write that failed; whatever the caller runs first, the writes reach the
// database in the order they were made.

// pendingWrite is one held-back write: a statement with "?" placeholders and its arguments.
type pendingWrite struct {
	table    string // the table it writes, to tell which write an error belongs to
	meanings errorMeanings
	query    string
	args     []any
}

// flushSavepoint is where a MySQL flush returns to when one of its writes fails, to send them
// again one by one and learn which it was: MySQL names neither the table nor the statement.
const flushSavepoint = "rushgate_deferred_writes"

// writeBuffer is the connection a transaction's statements run on (its GORM handle's ConnPool):
// the transaction itself, with the writes held back until the next statement. Like the
// transaction, it is used by one goroutine at a time.
type writeBuffer struct {
	// stmts runs the transaction's statements: tx on Postgres, conn on MySQL.
	stmts gorm.ConnPool
	tx    *sql.Tx   // Postgres: the transaction database/sql began
	conn  *sql.Conn // MySQL: the connection the transaction holds until it ends
	// begin is, on MySQL, the statement that begins the transaction until it has gone out in
	// front of the transaction's first statement; empty once it has, and on Postgres.
	begin string
	db    *DB
	ctx   context.Context // the transaction's, for the writes its commit sends
	// pending are the held-back writes, in the order they were made.
	pending []pendingWrite
	// locked names the rows the transaction read FOR UPDATE (lockedRow); a write to one of them
	// cannot miss it, so it needs no answer and may be held back.
	locked map[string]bool
	// failed is a flush's error that QueryRowContext could not answer with; the commit does.
	failed error
}

var (
	_ gorm.ConnPool    = (*writeBuffer)(nil)
	_ gorm.TxCommitter = (*writeBuffer)(nil)
)

// begin starts a transaction under ctx whose statements hold back deferred writes: on Postgres
// database/sql begins it at once; on MySQL it takes a connection of the pool and leaves the
// BEGIN to the transaction's first statement.
func (db *DB) begin(ctx context.Context, opts *sql.TxOptions) (*gorm.DB, error) {
	if db.dialect == Postgres {
		tx := db.gorm.WithContext(ctx).Begin(opts)
		if tx.Error != nil {
			return nil, tx.Error
		}
		if sqlTx, ok := tx.Statement.ConnPool.(*sql.Tx); ok {
			tx.Statement.ConnPool = &writeBuffer{stmts: sqlTx, tx: sqlTx, db: db, ctx: ctx}
		}
		return tx, nil
	}
	begin, err := beginMySQL(opts)
	if err != nil {
		return nil, err
	}
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return nil, err
	}
	tx := db.gorm.WithContext(ctx)
	tx.Statement.ConnPool = &writeBuffer{stmts: conn, conn: conn, begin: begin, db: db, ctx: ctx}
	return tx, nil
}

// beginMySQL is the statement that begins a MySQL transaction with opts: the session's
// isolation level unless opts names read committed, the only other level this package asks for.
func beginMySQL(opts *sql.TxOptions) (string, error) {
	switch {
	case opts == nil || opts.Isolation == sql.LevelDefault && !opts.ReadOnly:
		return "START TRANSACTION", nil
	case opts.Isolation == sql.LevelReadCommitted && !opts.ReadOnly:
		return "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION", nil
	}
	return "", fmt.Errorf("gormdb: transaction options %+v are not supported on MySQL", *opts)
}

// begun returns statements as one multi-statement, with the transaction's BEGIN in front of
// them the first time, when it has not gone out yet (MySQL).
func (b *writeBuffer) begun(statements ...string) string {
	if b.begin != "" {
		statements = append([]string{b.begin}, statements...)
		b.begin = ""
	}
	return strings.Join(statements, "; ")
}

// buffer returns the write buffer of the transaction ctx carries, if any.
func (db *DB) buffer(ctx context.Context) (*writeBuffer, bool) {
	tx, ok := db.transaction(ctx)
	if !ok {
		return nil, false
	}
	b, ok := tx.Statement.ConnPool.(*writeBuffer)
	return b, ok
}

// deferWrite holds w back until the transaction ctx carries sends its next statement; outside
// one it runs w at once.
func (db *DB) deferWrite(ctx context.Context, w pendingWrite) error {
	if b, ok := db.buffer(ctx); ok {
		b.pending = append(b.pending, w)
		return nil
	}
	_, err := db.exec(ctx, w.meanings, Bind(db.dialect, w.query), w.args...)
	return err
}

// lockRow records that the transaction ctx carries holds table's row id locked.
func (db *DB) lockRow(ctx context.Context, table, id string) {
	if b, ok := db.buffer(ctx); ok {
		if b.locked == nil {
			b.locked = make(map[string]bool)
		}
		b.locked[table+"\x00"+id] = true
	}
}

// holdsRow reports whether the transaction ctx carries read table's row id FOR UPDATE.
func (db *DB) holdsRow(ctx context.Context, table, id string) bool {
	b, ok := db.buffer(ctx)
	return ok && b.locked[table+"\x00"+id]
}

// flush sends the pending writes, in one statement.
func (b *writeBuffer) flush(ctx context.Context) error {
	writes := b.pending
	b.pending = nil
	switch {
	case len(writes) == 0:
		return nil
	case len(writes) == 1:
		w := writes[0]
		query := b.begun(Bind(b.db.dialect, w.query))
		_, err := b.db.execOn(ctx, b.stmts, w.meanings, query, w.args...)
		return err
	case b.db.dialect == Postgres:
		return b.flushPostgres(ctx, writes)
	default:
		return b.flushMySQL(ctx, writes)
	}
}

// flushPostgres sends the writes as one statement, "WITH w0 AS (first), … last": every
// data-modifying CTE runs, in order, whether or not the statement reads it. Postgres names the
// table of a violated constraint, which tells whose error it is.
func (b *writeBuffer) flushPostgres(ctx context.Context, writes []pendingWrite) error {
	last := writes[len(writes)-1]
	ctes, args := writesAsCTEs(writes[:len(writes)-1])
	query := Bind(Postgres, ctes+last.query)
	m := combinedMeanings(writes)
	ctx, end := b.db.traceStatement(ctx, m, query)
	_, err := b.tx.ExecContext(ctx, query, append(args, last.args...)...)
	end(err)
	if w, ok := refusingWrite(err, writes); ok {
		return translate(err, w.meanings)
	}
	return translate(err, m)
}

// writesAsCTEs is "WITH w0 AS (first), w1 AS (second), … " for writes, with their "?"
// placeholders, and their arguments in order.
func writesAsCTEs(writes []pendingWrite) (string, []any) {
	var ctes strings.Builder
	var args []any
	for i, w := range writes {
		if i == 0 {
			ctes.WriteString("WITH ")
		} else {
			ctes.WriteString(", ")
		}
		ctes.WriteString("w" + strconv.Itoa(i) + " AS (" + w.query + ")")
		args = append(args, w.args...)
	}
	if ctes.Len() > 0 {
		ctes.WriteString(" ")
	}
	return ctes.String(), args
}

// refusingWrite is the write among writes that err names the table of (Postgres), if any.
func refusingWrite(err error, writes []pendingWrite) (pendingWrite, bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		for _, w := range writes {
			if w.table == pgErr.TableName {
				return w, true
			}
		}
	}
	return pendingWrite{}, false
}

// queryOneLocking is queryOne for a locking read (FOR UPDATE) of table's row id. On Postgres,
// when the transaction ctx carries holds writes back and does not hold that row yet, the writes
// go in front of the read, as data-modifying CTEs of one statement. That statement's read does
// not see its writes (they share its snapshot), and need not: a held-back write is a new row
// (a crew member, an idempotency marker) or an update of a row the transaction already holds
// (Save defers only those), never the row this read locks. A refused write is answered with its
// own meanings, as flushPostgres answers it.
func (db *DB) queryOneLocking(ctx context.Context, table, id string, m errorMeanings, query string, args []any, scan func(*sql.Rows) error) (bool, error) {
	b, ok := db.buffer(ctx)
	if !ok || db.dialect != Postgres || len(b.pending) == 0 || db.holdsRow(ctx, table, id) {
		return db.queryOne(ctx, m, query, args, scan)
	}
	writes := b.pending
	b.pending = nil
	ctes, writeArgs := writesAsCTEs(writes)
	statement := Bind(Postgres, ctes) + shiftPlaceholders(query, len(writeArgs))
	ctx, end := db.traceStatement(ctx, errorMeanings{op: combinedMeanings(writes).op + ", " + m.op}, statement)
	found := false
	err := scanRows(ctx, b.tx, statement, append(writeArgs, args...), func(rows *sql.Rows) error {
		found = true
		return scan(rows)
	})
	end(err)
	if w, ok := refusingWrite(err, writes); ok {
		return false, translate(err, w.meanings)
	}
	return found, translate(err, m)
}

// shiftPlaceholders renumbers a Postgres statement's "$n" placeholders to "$n+by", for by
// arguments bound in front of its own. Like Bind, it assumes no "$" followed by a digit inside
// a literal.
func shiftPlaceholders(query string, by int) string {
	if by == 0 {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 8)
	for i := 0; i < len(query); i++ {
		b.WriteByte(query[i])
		if query[i] != '$' {
			continue
		}
		j := i + 1
		for j < len(query) && query[j] >= '0' && query[j] <= '9' {
			j++
		}
		if j == i+1 {
			continue
		}
		n, _ := strconv.Atoi(query[i+1 : j])
		b.WriteString(strconv.Itoa(n + by))
		i = j - 1
	}
	return b.String()
}

// flushMySQL sends the writes as one multi-statement behind a savepoint. When one of them is
// refused (a duplicate key, a missing parent, a CHECK), the transaction goes back to the
// savepoint and sends them one by one, so the error carries the meanings of the write that
// failed; a failure of the whole transaction (a deadlock, a lost connection) is answered as it is.
func (b *writeBuffer) flushMySQL(ctx context.Context, writes []pendingWrite) error {
	statements, args := savepointed(writes)
	m := combinedMeanings(writes)
	if _, err := b.db.execOn(ctx, b.stmts, m, b.begun(statements...), args...); err == nil ||
		!refusedWrite(err) {
		return err
	}
	return b.resendAlone(ctx, writes, m)
}

// savepointed is the multi-statement of flushMySQL: the savepoint, then the writes, with their
// arguments in order.
func savepointed(writes []pendingWrite) (statements []string, args []any) {
	statements = []string{"SAVEPOINT " + flushSavepoint}
	for _, w := range writes {
		statements = append(statements, w.query)
		args = append(args, w.args...)
	}
	return statements, args
}

// resendAlone takes the transaction back to the savepoint of a refused multi-statement and
// sends its writes again one by one: the refused one answers with its own meanings.
func (b *writeBuffer) resendAlone(ctx context.Context, writes []pendingWrite, m errorMeanings) error {
	if _, err := b.db.execOn(ctx, b.stmts, m, "ROLLBACK TO SAVEPOINT "+flushSavepoint); err != nil {
		return err
	}
	for _, w := range writes {
		if _, err := b.db.execOn(ctx, b.stmts, w.meanings, w.query, w.args...); err != nil {
			return err
		}
	}
	return nil
}

// refusedWrite reports an error that refused one statement and left the transaction open:
// not a deadlock, a lost connection or a timeout, which translate marks unavailable.
func refusedWrite(err error) bool {
	return !errors.Is(err, ports.ErrUnavailable)
}

// combinedMeanings names writes sent together: their operations, and no domain meaning, since
// no single write's applies to all.
func combinedMeanings(writes []pendingWrite) errorMeanings {
	ops := make([]string, len(writes))
	for i, w := range writes {
		ops[i] = w.meanings.op
	}
	return errorMeanings{op: strings.Join(ops, ", ")}
}

func (b *writeBuffer) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	if err := b.flush(ctx); err != nil {
		return nil, err
	}
	if b.begin != "" {
		if _, err := b.stmts.ExecContext(ctx, b.begun()); err != nil {
			return nil, err
		}
	}
	return b.stmts.PrepareContext(ctx, query)
}

func (b *writeBuffer) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := b.flush(ctx); err != nil {
		return nil, err
	}
	return b.stmts.ExecContext(ctx, b.begun(query), args...)
}

// QueryContext on MySQL sends the pending writes and the query as one multi-statement, so a
// transaction of many short steps (shared crew joins: one batch's writes, then the next batch's
// FOR UPDATE) pays one round trip a step; Postgres flushes them first (see flush): there only
// a locking read of a row not held yet carries them (queryOneLocking).
func (b *writeBuffer) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if b.db.dialect == MySQL && len(b.pending) > 0 {
		return b.queryAfterWritesMySQL(ctx, query, args)
	}
	if err := b.flush(ctx); err != nil {
		return nil, err
	}
	return b.stmts.QueryContext(ctx, b.begun(query), args...)
}

// queryAfterWritesMySQL sends the pending writes behind a savepoint and then query, in one
// multi-statement; the driver answers with the rows of its one statement that returns rows, the
// query. MySQL stops at a statement that fails and says neither which nor whose: after a refusal
// the writes go again alone, as flushMySQL sends them, and then the query alone.
func (b *writeBuffer) queryAfterWritesMySQL(ctx context.Context, query string, args []any) (*sql.Rows, error) {
	writes := b.pending
	b.pending = nil
	statements, all := savepointed(writes)
	multi := b.begun(append(statements, query)...)
	m := combinedMeanings(writes)
	ctx, end := b.db.traceStatement(ctx, m, multi)
	rows, err := b.stmts.QueryContext(ctx, multi, append(all, args...)...)
	end(err)
	if err == nil || !refusedWrite(translate(err, m)) {
		return rows, err
	}
	if err := b.resendAlone(ctx, writes, m); err != nil {
		return nil, err
	}
	return b.stmts.QueryContext(ctx, query, args...)
}

// QueryRowContext cannot answer a failed flush with its row: the row's query then runs on a
// transaction the database may have aborted, and the flush's error ends the transaction at its
// commit.
func (b *writeBuffer) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if err := b.flush(ctx); err != nil {
		b.failed = err
	}
	return b.stmts.QueryRowContext(ctx, b.begun(query), args...)
}

// Commit sends the pending writes, then commits: on MySQL in one multi-statement.
// A failure before the COMMIT went out wraps errCommitNotSent.
func (b *writeBuffer) Commit() error {
	if b.failed != nil {
		return fmt.Errorf("%w: %w", errCommitNotSent, b.failed)
	}
	if b.db.dialect == MySQL {
		return b.commitMySQL()
	}
	if err := b.flush(b.ctx); err != nil {
		return fmt.Errorf("%w: %w", errCommitNotSent, err)
	}
	return b.tx.Commit()
}

// commitMySQL sends the pending writes behind a savepoint and the COMMIT in one multi-statement,
// and gives the connection back to the pool once committed. A refused write stops MySQL before
// the COMMIT: the writes go again alone to name it, as flushMySQL does, and the transaction
// stays open for Rollback. A transaction that sent nothing never began: there is nothing to end.
func (b *writeBuffer) commitMySQL() error {
	writes := b.pending
	b.pending = nil
	if b.begin != "" && len(writes) == 0 {
		return b.conn.Close()
	}
	var statements []string
	var args []any
	m := errorMeanings{op: "commit"}
	if len(writes) > 0 {
		statements, args = savepointed(writes)
		m = combinedMeanings(writes)
	}
	commit := b.begun(append(statements, "COMMIT")...)
	if _, err := b.db.execOn(b.ctx, b.conn, m, commit, args...); err != nil {
		if len(writes) == 0 || !refusedWrite(err) {
			return err
		}
		if err := b.resendAlone(b.ctx, writes, m); err != nil {
			return fmt.Errorf("%w: %w", errCommitNotSent, err)
		}
		if _, err := b.db.execOn(b.ctx, b.conn, errorMeanings{op: "commit"}, "COMMIT"); err != nil {
			return err
		}
	}
	return b.conn.Close()
}

// Rollback drops the pending writes with the transaction.
func (b *writeBuffer) Rollback() error {
	b.pending = nil
	if b.db.dialect == MySQL {
		return b.rollbackMySQL()
	}
	return b.tx.Rollback()
}

// rollbackMySQL rolls the transaction back and gives the connection back to the pool. A
// transaction whose context has ended (its deadline is what ends many of them), or whose ROLLBACK
// fails, has its connection closed instead, which rolls it back on the server: the request waits
// for no ROLLBACK past its deadline, and no connection is pooled with a transaction open.
func (b *writeBuffer) rollbackMySQL() error {
	if b.begin != "" { // nothing went out: no transaction began
		return b.conn.Close()
	}
	if b.ctx.Err() == nil {
		if _, err := b.conn.ExecContext(b.ctx, "ROLLBACK"); err == nil {
			return b.conn.Close()
		}
	}
	return b.conn.Raw(func(any) error { return driver.ErrBadConn })
}
