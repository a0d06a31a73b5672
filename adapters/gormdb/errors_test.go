package gormdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"gorm.io/gorm"

	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
)

func TestTranslate(t *testing.T) {
	memberAdd := errorMeanings{op: "add crew member", notFound: crew.ErrNotFound, duplicate: crew.ErrAlreadyMember}
	plain := errorMeanings{op: "count crew members"}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	cases := []struct {
		name     string
		err      error
		meanings errorMeanings
		want     []error // each matched with errors.Is
		notWant  []error
	}{
		{"missing row", gorm.ErrRecordNotFound, memberAdd, []error{crew.ErrNotFound}, nil},
		{"database/sql missing row", sql.ErrNoRows, memberAdd, []error{crew.ErrNotFound}, nil},
		{"postgres foreign key", &pgconn.PgError{Code: "23503"}, memberAdd, []error{crew.ErrNotFound}, nil},
		{"mysql foreign key", &mysql.MySQLError{Number: 1452}, memberAdd, []error{crew.ErrNotFound}, nil},
		{"postgres unique", &pgconn.PgError{Code: "23505"}, memberAdd, []error{crew.ErrAlreadyMember}, nil},
		{"mysql duplicate", &mysql.MySQLError{Number: 1062}, memberAdd, []error{crew.ErrAlreadyMember}, nil},
		{"wrapped duplicate", fmt.Errorf("insert: %w", &mysql.MySQLError{Number: 1062}), memberAdd, []error{crew.ErrAlreadyMember}, nil},

		// Timeouts and lock waits.
		{"deadline", context.DeadlineExceeded, plain, []error{ports.ErrUnavailable}, nil},
		{"postgres lock timeout", &pgconn.PgError{Code: "55P03"}, plain, []error{ports.ErrUnavailable}, nil},
		{"postgres statement timeout", &pgconn.PgError{Code: "57014"}, plain, []error{ports.ErrUnavailable}, nil},
		{"mysql lock wait timeout", &mysql.MySQLError{Number: 1205}, plain, []error{ports.ErrUnavailable}, nil},

		// The connection or the server went away.
		{"bad connection", driver.ErrBadConn, plain, []error{ports.ErrUnavailable}, nil},
		{"mysql invalid connection", mysql.ErrInvalidConn, plain, []error{ports.ErrUnavailable}, nil},
		{"pgconn conn closed", fmt.Errorf("begin transaction: %w", pgconn.ErrConnClosed), plain, []error{ports.ErrUnavailable}, nil},
		{"unexpected EOF", fmt.Errorf("get crew: %w", io.ErrUnexpectedEOF), plain, []error{ports.ErrUnavailable}, nil},
		{"EOF", fmt.Errorf("read message: %w", io.EOF), plain, []error{ports.ErrUnavailable}, nil},
		{"connection reset", reset, plain, []error{ports.ErrUnavailable}, nil},
		{"broken pipe", fmt.Errorf("write: %w", os.NewSyscallError("write", syscall.EPIPE)), plain, []error{ports.ErrUnavailable}, nil},
		{"use of closed connection", fmt.Errorf("read: %w", net.ErrClosed), plain, []error{ports.ErrUnavailable}, nil},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, plain, []error{ports.ErrUnavailable}, nil},
		{"postgres shutting down", &pgconn.PgError{Severity: "FATAL", Code: "57P01"}, plain, []error{ports.ErrUnavailable}, nil},
		{"postgres starting up", &pgconn.PgError{Code: "57P03"}, plain, []error{ports.ErrUnavailable}, nil},
		{"postgres connection failure", &pgconn.PgError{Code: "08006"}, plain, []error{ports.ErrUnavailable}, nil},
		{"postgres too many connections", &pgconn.PgError{Code: "53300"}, plain, []error{ports.ErrUnavailable}, nil},
		{"postgres FATAL of any code", &pgconn.PgError{SeverityUnlocalized: "FATAL", Severity: "FATAL", Code: "XX000"}, plain, []error{ports.ErrUnavailable}, nil},
		{"mysql server shutdown", &mysql.MySQLError{Number: 1053}, plain, []error{ports.ErrUnavailable}, nil},
		{"mariadb connection killed", &mysql.MySQLError{Number: 1927}, plain, []error{ports.ErrUnavailable}, nil},
		{"mysql too many connections", &mysql.MySQLError{Number: 1040}, plain, []error{ports.ErrUnavailable}, nil},

		// Conflicts: retryable, and unavailable once the retries are spent.
		{"postgres deadlock", &pgconn.PgError{Code: "40P01"}, plain, []error{errTxConflict, ports.ErrUnavailable}, nil},
		{"postgres serialization failure", &pgconn.PgError{Code: "40001"}, plain, []error{errTxConflict, ports.ErrUnavailable}, nil},
		{"mysql deadlock", fmt.Errorf("update: %w", &mysql.MySQLError{Number: 1213}), plain, []error{errTxConflict, ports.ErrUnavailable}, nil},

		// A write a read-only server (a standby, a demoted primary), transaction or session refused:
		// failover may bring a primary back.
		{"postgres read-only transaction", &pgconn.PgError{Code: "25006"}, plain, []error{errReadOnly, ports.ErrUnavailable}, []error{errTxConflict}},
		{"mysql read_only server", &mysql.MySQLError{Number: 1290, Message: "The MariaDB server is running with the --read-only option so it cannot execute this statement"},
			plain, []error{errReadOnly, ports.ErrUnavailable}, nil},
		{"mysql read-only transaction", &mysql.MySQLError{Number: 1792}, plain, []error{errReadOnly, ports.ErrUnavailable}, nil},
		{"mysql read-only mode", &mysql.MySQLError{Number: 1836}, plain, []error{errReadOnly, ports.ErrUnavailable}, nil},
		{"mysql option other than read-only", &mysql.MySQLError{Number: 1290, Message: "The MySQL server is running with the --secure-file-priv option so it cannot execute this statement"},
			plain, nil, []error{errReadOnly, ports.ErrUnavailable}},

		// Out of disk space or memory: the statement may succeed once some is freed.
		{"postgres insufficient resources", &pgconn.PgError{Code: "53000"}, plain, []error{errOutOfResources, ports.ErrUnavailable}, nil},
		{"postgres disk full", &pgconn.PgError{Code: "53100", Message: `could not extend file "base/5/16410": No space left on device`},
			memberAdd, []error{errOutOfResources, ports.ErrUnavailable}, []error{errTxConflict, crew.ErrNotFound}},
		{"postgres out of memory", &pgconn.PgError{Code: "53200"}, plain, []error{errOutOfResources, ports.ErrUnavailable}, nil},
		{"postgres configuration limit", &pgconn.PgError{Code: "53400"}, plain, nil, []error{errOutOfResources, ports.ErrUnavailable}},
		{"mysql disk full", &mysql.MySQLError{Number: 1021}, plain, []error{errOutOfResources, ports.ErrUnavailable}, nil},
		{"mysql out of memory", &mysql.MySQLError{Number: 1037}, plain, []error{errOutOfResources, ports.ErrUnavailable}, nil},
		{"mysql out of resources", &mysql.MySQLError{Number: 1041}, plain, []error{errOutOfResources, ports.ErrUnavailable}, nil},
		{"mariadb tablespace full", fmt.Errorf("save idempotency markers: %w", &mysql.MySQLError{Number: 1114, Message: "The table 'idempotency_markers' is full"}),
			memberAdd, []error{errOutOfResources, ports.ErrUnavailable}, []error{errTxConflict, crew.ErrNotFound}},
		{"mysql out of sort memory, a setting", &mysql.MySQLError{Number: 1038}, plain, nil, []error{errOutOfResources, ports.ErrUnavailable}},
		{"mariadb file write, disk full", &mysql.MySQLError{Number: 3, Message: `Error writing file './binlog.000001' (Errcode: 28 "No space left on device")`},
			plain, []error{errOutOfResources, ports.ErrUnavailable}, nil},
		{"mysql file write, disk full", &mysql.MySQLError{Number: 3, Message: "Error writing file '/tmp/MYfd=42' (OS errno 28 - No space left on device)"},
			plain, []error{errOutOfResources, ports.ErrUnavailable}, nil},
		{"mariadb write error, quota", &mysql.MySQLError{Number: 1026, Message: `Error writing file 'x' (errno: 122 "Disk quota exceeded")`},
			plain, []error{errOutOfResources, ports.ErrUnavailable}, nil},
		{"mysql write error, I/O", &mysql.MySQLError{Number: 1026, Message: "Error writing file 'x' (errno: 5 - Input/output error)"},
			plain, nil, []error{errOutOfResources, ports.ErrUnavailable}},
		{"mysql write error, errno 280", &mysql.MySQLError{Number: 3, Message: "Error writing file 'x' (Errcode: 280)"},
			plain, nil, []error{errOutOfResources, ports.ErrUnavailable}},

		// CHECK constraints: named, and a server fault rather than an outage.
		{"postgres check", &pgconn.PgError{Code: "23514"}, plain, []error{errCheckViolation}, []error{ports.ErrUnavailable, errTxConflict}},
		{"mysql check", &mysql.MySQLError{Number: 3819}, plain, []error{errCheckViolation}, []error{ports.ErrUnavailable, errTxConflict}},
		{"mariadb check", &mysql.MySQLError{Number: 4025}, plain, []error{errCheckViolation}, []error{ports.ErrUnavailable, errTxConflict}},

		// Bad data is not an outage.
		{"postgres NUL in text", &pgconn.PgError{Code: "22021"}, plain, nil, []error{ports.ErrUnavailable, errTxConflict, errCheckViolation}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := translate(tc.err, tc.meanings)
			for _, want := range tc.want {
				assert.ErrorIs(t, got, want)
			}
			for _, notWant := range tc.notWant {
				assert.NotErrorIs(t, got, notWant)
			}
			if tc.meanings.notFound == nil {
				assert.ErrorIs(t, got, tc.err, "the driver's error stays wrapped")
			}
		})
	}
}

func TestTranslate_KeepsOtherErrorsWithContext(t *testing.T) {
	cause := &pgconn.PgError{Code: "23505"}

	// A duplicate where the operation gives it no meaning is just an error.
	got := translate(cause, errorMeanings{op: "create crew"})

	assert.ErrorIs(t, got, cause)
	assert.NotErrorIs(t, got, crew.ErrAlreadyMember)
	assert.NotErrorIs(t, got, ports.ErrUnavailable)
	assert.Contains(t, got.Error(), "create crew")
}

func TestTranslate_Nil(t *testing.T) {
	assert.NoError(t, translate(nil, errorMeanings{op: "get crew", notFound: crew.ErrNotFound}))
}

func TestTranslate_NamesTheViolatedUniqueKey(t *testing.T) {
	first, second := errors.New("first"), errors.New("second")
	m := errorMeanings{op: "add", duplicateByKey: map[string]error{"one_per_user": first, "one_per_session": second}}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"postgres", &pgconn.PgError{Code: "23505", ConstraintName: "one_per_session"}, second},
		{"mysql 8", &mysql.MySQLError{Number: 1062, Message: "Duplicate entry 'a-b' for key 'verifications.one_per_user'"}, first},
		{"mariadb", &mysql.MySQLError{Number: 1062, Message: "Duplicate entry 's' for key 'one_per_session'"}, second},
	} {
		if got := translate(tc.err, m); !errors.Is(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
