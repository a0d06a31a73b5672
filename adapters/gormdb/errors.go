package gormdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/rushgate/rushgate/ports"
)

// Server error codes the mapping recognises.
const (
	pgUniqueViolation      = "23505"
	pgForeignKeyViolation  = "23503"
	pgCheckViolation       = "23514"
	pgSerializationFailure = "40001"
	pgDeadlockDetected     = "40P01"
	pgTooManyConnections   = "53300"
	// pgInsufficientResources, pgDiskFull and pgOutOfMemory are the server short of disk space or
	// memory. The class's other code, 53400 configuration_limit_exceeded, is a limit a setting
	// sets (max_prepared_transactions, max_replication_slots…), which trying again does not lift.
	pgInsufficientResources = "53000"
	pgDiskFull              = "53100"
	pgOutOfMemory           = "53200"
	pgLockNotAvailable      = "55P03" // lock_timeout expired
	pgQueryCanceled         = "57014" // statement_timeout or a cancel request
	pgAdminShutdown         = "57P01" // pg_ctl stop, pg_terminate_backend
	pgCrashShutdown         = "57P02"
	pgCannotConnectNow      = "57P03" // starting up or shutting down
	// pgReadOnlyTransaction is a write refused by a hot standby, or in a transaction or session
	// set read-only.
	pgReadOnlyTransaction = "25006"
	// pgConnectionException is the class (first two characters) of connection failures.
	pgConnectionException = "08"

	myDuplicateEntry        = 1062
	myNoReferencedRow       = 1452
	myCheckViolated         = 3819 // MySQL's ER_CHECK_CONSTRAINT_VIOLATED
	mariaDBConstraintFailed = 4025 // MariaDB's ER_CONSTRAINT_FAILED, its CHECK violation
	myDeadlock              = 1213 // the transaction was rolled back to break a deadlock
	myLockWaitTimeout       = 1205 // innodb_lock_wait_timeout expired
	myTooManyConnections    = 1040
	// The server short of disk space or memory. myRecordFileFull ("The table … is full") is what
	// InnoDB answers when its tablespace cannot grow: the disk is full or the file is at its
	// configured maximum. A failed file write counts only with errno ENOSPC or EDQUOT
	// (writeFailedForSpace). 1038 ER_OUT_OF_SORTMEMORY is left out: its message asks for a larger
	// sort_buffer_size, a setting that trying again does not change, like Postgres's 53400.
	myFileWriteFailed       = 3    // EE_WRITE, "Error writing file … (Errcode: 28 …)"
	myDiskFull              = 1021 // ER_DISK_FULL
	myErrorOnWrite          = 1026 // ER_ERROR_ON_WRITE, "Error writing file … (errno: 28 …)"
	myOutOfMemory           = 1037 // ER_OUTOFMEMORY
	myOutOfResources        = 1041 // ER_OUT_OF_RESOURCES
	myRecordFileFull        = 1114 // ER_RECORD_FILE_FULL
	myServerShutdown        = 1053
	mariaDBConnectionKilled = 1927
	// myOptionPreventsStatement is a statement a server option refuses; with "--read-only" in
	// its message, a write on a server set read_only (a replica, a demoted primary).
	myOptionPreventsStatement = 1290
	myReadOnlyTransaction     = 1792 // a write in a transaction or session set read-only
	myReadOnlyMode            = 1836 // a write on a server in read-only mode (innodb_read_only)
)

var (
	// errCheckViolation marks a write a CHECK constraint refused. The domain's rules should have
	// stopped it first, so it stays a server fault, but one callers can tell with errors.Is.
	errCheckViolation = errors.New("gormdb: check constraint violated")
	// errTxConflict marks a transaction the database aborted to break a deadlock or a
	// serialization conflict: rerun from the start, it may well succeed, and TxRunner.InTx does
	// so. It comes with ports.ErrUnavailable, so a conflict that outlasts the retries answers
	// 503 and the client retries later.
	errTxConflict = errors.New("gormdb: transaction aborted by a deadlock or serialization conflict")
	// errReadOnly marks a write the database refused because it, or the connection, is
	// read-only: during a failover the database's address can lead for a while to a standby or
	// a demoted primary. It comes with ports.ErrUnavailable: the write may succeed once failover
	// completes.
	errReadOnly = errors.New("gormdb: the database is read-only (a standby or a demoted primary?)")
	// errOutOfResources marks a statement the database refused for want of disk space or memory:
	// a full disk, a tablespace at its maximum size, memory exhausted. It comes with
	// ports.ErrUnavailable: the statement may succeed once space or memory is freed, which
	// needs no restart of rushgate, and the connection stays usable meanwhile.
	errOutOfResources = errors.New("gormdb: the database is out of disk space or memory")
)

// errorMeanings names, for one repository operation, the domain errors that storage outcomes
// stand for. A nil field means the operation cannot produce that outcome.
type errorMeanings struct {
	op string
	// notFound is returned for a missing row (GORM's or database/sql's), or a foreign key naming
	// a missing parent.
	notFound error
	// duplicate is returned for a UNIQUE or PRIMARY KEY violation.
	duplicate error
	// duplicateByKey, for a table with several unique keys, returns the error of the violated
	// key's name; a name it lacks falls back to duplicate.
	duplicateByKey map[string]error
}

// translate maps a GORM or driver error to what the ports promise: the domain errors in m;
// errTxConflict with ports.ErrUnavailable for a deadlock or serialization failure; errReadOnly
// with ports.ErrUnavailable for a write a read-only database refused; errOutOfResources with
// ports.ErrUnavailable for a statement refused for want of disk space or memory;
// ports.ErrUnavailable for a lost connection, a server going away and timeouts;
// errCheckViolation for a CHECK constraint; and otherwise err wrapped with the operation's
// name. The driver's error stays wrapped in every case. Every repository reports errors
// through it.
func translate(err error, m errorMeanings) error {
	if err == nil {
		return nil
	}
	if m.notFound != nil && (errors.Is(err, gorm.ErrRecordNotFound) || errors.Is(err, sql.ErrNoRows) ||
		isForeignKeyViolation(err)) {
		return m.notFound
	}
	if isDuplicate(err) {
		if byKey, ok := m.duplicateByKey[violatedKey(err)]; ok {
			return byKey
		}
		if m.duplicate != nil {
			return m.duplicate
		}
	}
	switch {
	case isTxConflict(err):
		return fmt.Errorf("gormdb: %s: %w: %w: %w", m.op, errTxConflict, ports.ErrUnavailable, err)
	case isReadOnly(err):
		return fmt.Errorf("gormdb: %s: %w: %w: %w", m.op, errReadOnly, ports.ErrUnavailable, err)
	case isOutOfResources(err):
		return fmt.Errorf("gormdb: %s: %w: %w: %w", m.op, errOutOfResources, ports.ErrUnavailable, err)
	case isUnavailable(err):
		return fmt.Errorf("gormdb: %s: %w: %w", m.op, ports.ErrUnavailable, err)
	case isCheckViolation(err):
		return fmt.Errorf("gormdb: %s: %w: %w", m.op, errCheckViolation, err)
	}
	return fmt.Errorf("gormdb: %s: %w", m.op, err)
}

func isDuplicate(err error) bool {
	return hasPgCode(err, pgUniqueViolation) || hasMySQLNumber(err, myDuplicateEntry)
}

// violatedKey names the unique constraint or index a duplicate-key error violated: Postgres
// reports it as a field, MySQL and MariaDB only in the message ("… for key 'table.name'" or
// "… for key 'name'").
func violatedKey(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.ConstraintName
	}
	var myErr *mysql.MySQLError
	if !errors.As(err, &myErr) {
		return ""
	}
	_, key, found := strings.Cut(myErr.Message, " for key '")
	if !found {
		return ""
	}
	key = strings.TrimSuffix(key, "'")
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		key = key[i+1:]
	}
	return key
}

func isForeignKeyViolation(err error) bool {
	return hasPgCode(err, pgForeignKeyViolation) || hasMySQLNumber(err, myNoReferencedRow)
}

func isCheckViolation(err error) bool {
	return hasPgCode(err, pgCheckViolation) || hasMySQLNumber(err, myCheckViolated, mariaDBConstraintFailed)
}

// isTxConflict reports a transaction the database rolled back to resolve a deadlock or a
// serialization conflict (MySQL reports both as 1213).
func isTxConflict(err error) bool {
	return hasPgCode(err, pgDeadlockDetected, pgSerializationFailure) || hasMySQLNumber(err, myDeadlock)
}

// isReadOnly reports a write the database refused because it is read-only (a hot standby, a
// server set read_only) or the transaction or session is.
func isReadOnly(err error) bool {
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) && myErr.Number == myOptionPreventsStatement {
		return strings.Contains(myErr.Message, "read-only")
	}
	return hasPgCode(err, pgReadOnlyTransaction) || hasMySQLNumber(err, myReadOnlyTransaction, myReadOnlyMode)
}

// isOutOfResources reports a statement the database refused for want of disk space or memory.
func isOutOfResources(err error) bool {
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) && (myErr.Number == myFileWriteFailed || myErr.Number == myErrorOnWrite) {
		return writeFailedForSpace(myErr.Message)
	}
	return hasPgCode(err, pgInsufficientResources, pgDiskFull, pgOutOfMemory) ||
		hasMySQLNumber(err, myDiskFull, myOutOfMemory, myOutOfResources, myRecordFileFull)
}

// writeFailedForSpace reports whether a MySQL or MariaDB message of a failed file write names
// errno 28 (ENOSPC, no space left on device) or 122 (EDQUOT, disk quota exceeded). MariaDB
// writes it "(Errcode: 28 …" or "(errno: 28 …", MySQL "(OS errno 28 - …" or "(errno: 28 - …".
func writeFailedForSpace(message string) bool {
	for _, prefix := range []string{"(Errcode: ", "(errno: ", "(OS errno "} {
		_, rest, found := strings.Cut(message, prefix)
		if !found {
			continue
		}
		end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
		if end < 0 {
			end = len(rest)
		}
		errno := rest[:end]
		return errno == "28" || errno == "122"
	}
	return false
}

// isUnavailable reports a database that cannot be reached, went away mid-call (a lost
// connection, see isConnectionLost), or did not answer in time, including a row lock that was
// not granted within the deadline.
func isUnavailable(err error) bool {
	if isConnectionLost(err) {
		return true
	}
	var (
		netErr     net.Error
		connectErr *pgconn.ConnectError
		pgErr      *pgconn.PgError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, sql.ErrConnDone),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.As(err, &netErr),
		errors.As(err, &connectErr),
		pgconn.Timeout(err):
		return true
	case errors.As(err, &pgErr):
		// A FATAL or PANIC error ends the session whatever its code.
		severity := pgErr.SeverityUnlocalized
		if severity == "" {
			severity = pgErr.Severity
		}
		return severity == "FATAL" || severity == "PANIC" ||
			slices.Contains([]string{pgLockNotAvailable, pgQueryCanceled, pgTooManyConnections, pgCannotConnectNow}, pgErr.Code)
	}
	return hasMySQLNumber(err, myLockWaitTimeout, myTooManyConnections)
}

// isConnectionLost reports the error of a connection that was open and died under the call:
// closed or reset by the server or the network, or ended by the server (an operator's
// pg_terminate_backend or KILL CONNECTION, a pooler or proxy restarting, a shutdown). A
// connection that could not be opened is not one: nothing was lost, and a new one would most
// likely be refused too.
func isConnectionLost(err error) bool {
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return false
	}
	var pgErr *pgconn.PgError
	return errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, pgConnectionException) ||
			pgErr.Code == pgAdminShutdown || pgErr.Code == pgCrashShutdown) ||
		hasMySQLNumber(err, myServerShutdown, mariaDBConnectionKilled)
}

// hasPgCode reports whether err wraps a Postgres error with one of codes.
func hasPgCode(err error, codes ...string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && slices.Contains(codes, pgErr.Code)
}

// hasMySQLNumber reports whether err wraps a MySQL or MariaDB error with one of numbers.
func hasMySQLNumber(err error, numbers ...uint16) bool {
	var myErr *mysql.MySQLError
	return errors.As(err, &myErr) && slices.Contains(numbers, myErr.Number)
}
