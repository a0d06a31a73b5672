package gormdb

import (
	"context"
	"database/sql/driver"
	"fmt"
)

// readOnlyDropper opens the pool's connections through a driver's connector, and has the pool
// drop one that refused a write as read-only (isReadOnly) rather than hand it out again.
//
// During a failover the database's address can lead for a while to a server that refuses
// writes: a hot standby, or a primary demoted to one. A connection opened to it stays on that
// server once the address leads to the new primary, and stays read-only; pooled, it would refuse
// the writes of the requests it served until a restart. database/sql drops a connection that
// reports itself invalid (driver.Validator) when it comes back to the pool: each such connection
// thus fails one write, answered 503, and the pool opens a new one to wherever the address leads
// then. Until a connection refuses a write, reads use it as usual.
type readOnlyDropper struct{ driver.Connector }

// pooledConn is what the drivers' connections (pgx's stdlib and go-sql-driver's) implement and
// database/sql uses; readOnlyConn implements it too, so the pool uses the driver's own methods.
type pooledConn interface {
	driver.Conn
	driver.ConnPrepareContext
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.NamedValueChecker
	driver.SessionResetter
}

// Connect opens a connection of the driver's and wraps it.
func (d readOnlyDropper) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := d.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	pooled, ok := conn.(pooledConn)
	if !ok {
		_ = conn.Close()
		return nil, fmt.Errorf("gormdb: the driver's connection %T lacks a method database/sql uses", conn)
	}
	return &readOnlyConn{pooledConn: pooled}, nil
}

// readOnlyConn is a driver's connection that reports itself invalid once a statement it ran was
// refused as read-only. database/sql uses a connection from one goroutine at a time.
type readOnlyConn struct {
	pooledConn
	readOnly bool
}

func (c *readOnlyConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	res, err := c.pooledConn.ExecContext(ctx, query, args)
	c.noteReadOnly(err)
	return res, err
}

// QueryContext notes a refusal the query answers with; both drivers answer one before the first
// row, with the rows' error.
func (c *readOnlyConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := c.pooledConn.QueryContext(ctx, query, args)
	c.noteReadOnly(err)
	return rows, err
}

func (c *readOnlyConn) noteReadOnly(err error) {
	if err != nil && isReadOnly(err) {
		c.readOnly = true
	}
}

// IsValid reports false once the connection refused a write as read-only, so the pool drops it
// when it comes back; otherwise it is the driver's answer, if it gives one.
func (c *readOnlyConn) IsValid() bool {
	if c.readOnly {
		return false
	}
	if validator, ok := c.pooledConn.(driver.Validator); ok {
		return validator.IsValid()
	}
	return true
}
