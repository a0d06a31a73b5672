package gormdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/rushgate/rushgate/ports"
)

// Server error codes the mapping recognises.
const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"
	pgLockNotAvailable    = "55P03" // lock_timeout expired
	pgQueryCanceled       = "57014" // statement_timeout or a cancel request

	myDuplicateEntry  = 1062
	myNoReferencedRow = 1452
	myLockWaitTimeout = 1205 // innodb_lock_wait_timeout expired
)

// errorMeanings names, for one repository operation, the domain errors that storage outcomes
// stand for. A nil field means the operation cannot produce that outcome.
type errorMeanings struct {
	op string
	// notFound is returned for a missing row, or a foreign key naming a missing parent.
	notFound error
	// duplicate is returned for a UNIQUE or PRIMARY KEY violation.
	duplicate error
}

// translate maps a GORM or driver error to what the ports promise: the domain errors in m,
// ports.ErrUnavailable for connection failures and timeouts, and otherwise err wrapped with the
// operation's name. Every repository reports errors through it.
func translate(err error, m errorMeanings) error {
	if err == nil {
		return nil
	}
	if m.notFound != nil && (errors.Is(err, gorm.ErrRecordNotFound) || isForeignKeyViolation(err)) {
		return m.notFound
	}
	if m.duplicate != nil && isDuplicate(err) {
		return m.duplicate
	}
	if isUnavailable(err) {
		return fmt.Errorf("gormdb: %s: %w: %w", m.op, ports.ErrUnavailable, err)
	}
	return fmt.Errorf("gormdb: %s: %w", m.op, err)
}

func isDuplicate(err error) bool {
	var pgErr *pgconn.PgError
	var myErr *mysql.MySQLError
	return errors.As(err, &pgErr) && pgErr.Code == pgUniqueViolation ||
		errors.As(err, &myErr) && myErr.Number == myDuplicateEntry
}

func isForeignKeyViolation(err error) bool {
	var pgErr *pgconn.PgError
	var myErr *mysql.MySQLError
	return errors.As(err, &pgErr) && pgErr.Code == pgForeignKeyViolation ||
		errors.As(err, &myErr) && myErr.Number == myNoReferencedRow
}

// isUnavailable reports a database that cannot be reached or did not answer in time, including a
// row lock that was not granted within the deadline.
func isUnavailable(err error) bool {
	var (
		netErr     net.Error
		connectErr *pgconn.ConnectError
		pgErr      *pgconn.PgError
		myErr      *mysql.MySQLError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, driver.ErrBadConn),
		errors.Is(err, sql.ErrConnDone),
		errors.Is(err, mysql.ErrInvalidConn),
		errors.As(err, &netErr),
		errors.As(err, &connectErr),
		pgconn.Timeout(err):
		return true
	case errors.As(err, &pgErr):
		return pgErr.Code == pgLockNotAvailable || pgErr.Code == pgQueryCanceled
	case errors.As(err, &myErr):
		return myErr.Number == myLockWaitTimeout
	}
	return false
}
