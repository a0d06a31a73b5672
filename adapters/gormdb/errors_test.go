package gormdb

import (
	"context"
	"database/sql/driver"
	"fmt"
	"net"
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
	cases := []struct {
		name     string
		err      error
		meanings errorMeanings
		want     error // matched with errors.Is
	}{
		{"missing row", gorm.ErrRecordNotFound, memberAdd, crew.ErrNotFound},
		{"postgres foreign key", &pgconn.PgError{Code: "23503"}, memberAdd, crew.ErrNotFound},
		{"mysql foreign key", &mysql.MySQLError{Number: 1452}, memberAdd, crew.ErrNotFound},
		{"postgres unique", &pgconn.PgError{Code: "23505"}, memberAdd, crew.ErrAlreadyMember},
		{"mysql duplicate", &mysql.MySQLError{Number: 1062}, memberAdd, crew.ErrAlreadyMember},
		{"wrapped duplicate", fmt.Errorf("insert: %w", &mysql.MySQLError{Number: 1062}), memberAdd, crew.ErrAlreadyMember},
		{"deadline", context.DeadlineExceeded, plain, ports.ErrUnavailable},
		{"bad connection", driver.ErrBadConn, plain, ports.ErrUnavailable},
		{"mysql invalid connection", mysql.ErrInvalidConn, plain, ports.ErrUnavailable},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, plain, ports.ErrUnavailable},
		{"postgres lock timeout", &pgconn.PgError{Code: "55P03"}, plain, ports.ErrUnavailable},
		{"postgres statement timeout", &pgconn.PgError{Code: "57014"}, plain, ports.ErrUnavailable},
		{"mysql lock wait timeout", &mysql.MySQLError{Number: 1205}, plain, ports.ErrUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := translate(tc.err, tc.meanings)
			assert.ErrorIs(t, got, tc.want)
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
