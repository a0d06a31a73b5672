// Package gormdb implements the repositories and the transaction runner on Postgres and
// MySQL/MariaDB through GORM, with versioned schema migrations per dialect.
package gormdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/url"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/rushgate/rushgate/ports"
)

// Defaults applied by Open to zero Options fields.
const (
	DefaultMaxOpenConns   = 20
	DefaultConnectTimeout = time.Second
	DefaultTxTimeout      = time.Second
	DefaultTxAttempts     = 3
)

// Options tunes the connection pool and the time the database may take to answer.
type Options struct {
	// MaxOpenConns caps the pool's connections, and so how many times TxRunner.InTx runs again a
	// transaction whose connection was lost before its COMMIT (each may have died), and a
	// repository a read or an idempotent write (a raffle entry batch) outside one. Default 20.
	MaxOpenConns int
	// ConnectTimeout bounds establishing a connection and Ping. Default 1s.
	ConnectTimeout time.Duration
	// TxTimeout bounds each TxRunner.InTx (every attempt and pause included), and each
	// repository call made outside one, so a stuck database (or a row lock held elsewhere)
	// answers with ports.ErrUnavailable within it; on MySQL it also bounds each read and write of
	// a connection but for migrations'. Default 1s.
	TxTimeout time.Duration
	// TxAttempts is how many times TxRunner.InTx runs a transaction the database aborted to
	// break a deadlock or a serialization conflict, the first run included. Default 3.
	TxAttempts int
	// ReplicaURLs are read replicas of the database, same dialect: reads a caller marked with
	// ports.AllowStale, made outside a transaction, go to one of them; everything else goes to
	// the database. Each replica's pool is sized and bounded as the database's. None by default.
	ReplicaURLs []string
	// ReplicaFallback, when set, is called for each run of such a read the database made because
	// a replica failed it or was skipped after failing one (a read runs again when the
	// database's connection is lost too).
	ReplicaFallback func()
	// Tracing, when set, records every statement as an OpenTelemetry span (see tracing.go).
	Tracing trace.TracerProvider

	// dial, when set, opens the connections (tests count round trips with it).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (o Options) withDefaults() Options {
	if o.MaxOpenConns <= 0 {
		o.MaxOpenConns = DefaultMaxOpenConns
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.TxTimeout <= 0 {
		o.TxTimeout = DefaultTxTimeout
	}
	if o.TxAttempts <= 0 {
		o.TxAttempts = DefaultTxAttempts
	}
	return o
}

// DB is an open connection pool to one Postgres or MySQL database.
type DB struct {
	gorm    *gorm.DB
	sql     *sql.DB
	dialect Dialect
	opts    Options
	// openMigrationPool opens a pool for migrations where sql's connections bound each read and
	// write by TxTimeout (MySQL), since a migration's DDL may take longer; nil: migrate on sql.
	openMigrationPool func() *sql.DB
	// readGorm runs the reads replicas may serve (see replica.go), nil without replicas; replicas
	// are their pools.
	readGorm *gorm.DB
	replicas []*replicaPool
	// tracer and system trace the hand-written statements; tracer is nil without Options.Tracing.
	tracer trace.Tracer
	system attribute.KeyValue
}

// Open connects to databaseURL (see ParseURL) and pings it. A server that cannot be reached
// within opts.ConnectTimeout yields an error wrapping ports.ErrUnavailable that names the
// dialect and host, never the password.
func Open(ctx context.Context, databaseURL string, opts Options) (*DB, error) {
	opts = opts.withDefaults()
	dialect, dsn, err := ParseURL(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("gormdb: database URL: %w", err)
	}
	host := ""
	if u, err := url.Parse(databaseURL); err == nil {
		host = u.Host
	}

	sqlDB, dialector, openMigrationPool, err := connect(dialect, dsn, opts)
	if err != nil {
		return nil, fmt.Errorf("gormdb: configure %s connection to %s: %w", dialect, host, err)
	}
	sqlDB.SetMaxOpenConns(opts.MaxOpenConns)
	sqlDB.SetMaxIdleConns(opts.MaxOpenConns)

	db := &DB{sql: sqlDB, dialect: dialect, opts: opts, openMigrationPool: openMigrationPool}
	if err := db.ping(ctx); err != nil {
		_ = sqlDB.Close()
		// Whatever the cause (refused, timed out, bad credentials), the database cannot serve.
		return nil, fmt.Errorf("gormdb: connect to %s at %s: %w: %w", dialect, host, ports.ErrUnavailable, err)
	}
	db.gorm, err = gorm.Open(dialector, gormConfig())
	if err != nil {
		_ = sqlDB.Close()
		return nil, translate(err, errorMeanings{op: fmt.Sprintf("initialise %s at %s", dialect, host)})
	}
	if opts.Tracing != nil {
		if err := db.traceStatements(opts.Tracing); err != nil {
			_ = sqlDB.Close()
			return nil, err
		}
	}
	if len(opts.ReplicaURLs) > 0 {
		if err := db.openReplicas(opts.ReplicaURLs); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	return db, nil
}

// connect builds the driver's connection pool with a dial timeout, and the GORM dialector on it.
// On MySQL it also returns how to open a pool for migrations (see DB.openMigrationPool).
func connect(dialect Dialect, dsn string, opts Options) (*sql.DB, gorm.Dialector, func() *sql.DB, error) {
	switch dialect {
	case Postgres:
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, nil, nil, err
		}
		cfg.ConnectTimeout = opts.ConnectTimeout
		if opts.dial != nil {
			cfg.DialFunc = opts.dial
		}
		sqlDB := sql.OpenDB(readOnlyDropper{stdlib.GetConnector(*cfg)})
		return sqlDB, postgres.New(postgres.Config{Conn: sqlDB}), nil, nil
	case MySQL:
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, nil, nil, err
		}
		cfg.Timeout = opts.ConnectTimeout
		cfg.DialFunc = opts.dial
		// Report matched rather than changed rows, so an UPDATE that writes an unchanged value
		// still proves the row exists.
		cfg.ClientFoundRows = true
		// Writes a transaction holds back go out as one multi-statement (see writebuffer.go). The
		// driver interpolates every value, escaped, and no statement is built from input.
		cfg.MultiStatements = true
		// The driver prints each failed read to stderr; the error also comes back, and the
		// server logs that.
		cfg.Logger = mysql.Logger(log.New(io.Discard, "", 0))
		migrationCfg := cfg.Clone()
		// database/sql sends COMMIT and ROLLBACK without a context, and this driver then waits
		// for the reply with no deadline: a server that stops answering would hold the request
		// (and the lock queue behind it) forever. Bounding each read and write by TxTimeout ends
		// such a wait within one timeout of the stall; statements are bounded by it anyway.
		cfg.ReadTimeout, cfg.WriteTimeout = opts.TxTimeout, opts.TxTimeout
		connector, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		migrationConnector, err := mysql.NewConnector(migrationCfg)
		if err != nil {
			return nil, nil, nil, err
		}
		sqlDB := sql.OpenDB(readOnlyDropper{connector})
		openMigrationPool := func() *sql.DB { return sql.OpenDB(migrationConnector) }
		return sqlDB, gormmysql.New(gormmysql.Config{Conn: sqlDB}), openMigrationPool, nil
	default:
		return nil, nil, nil, fmt.Errorf("unsupported dialect %q", dialect)
	}
}

// Dialect reports which database this is.
func (db *DB) Dialect() Dialect { return db.dialect }

// SQL returns the underlying pool, for readiness checks and raw measurements.
func (db *DB) SQL() *sql.DB { return db.sql }

// Ping checks that the database answers within ConnectTimeout; failures wrap
// ports.ErrUnavailable.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.ping(ctx); err != nil {
		return fmt.Errorf("gormdb: ping %s: %w: %w", db.dialect, ports.ErrUnavailable, err)
	}
	return nil
}

// Fill opens connections until the pool holds all Options.MaxOpenConns, idle, one at a time,
// each within ConnectTimeout. A fresh pool opens a connection per request when a burst comes,
// all at the same moment; a Postgres connection is a process forked and set up, and on a busy
// machine a burst's first second then went to opening them, past the requests' timeout. The
// pool keeps them (as many idle as open, no idle timeout); it fills again on demand if the
// database closes some. Failures wrap ports.ErrUnavailable; what was opened stays open.
func (db *DB) Fill(ctx context.Context) error {
	held := make([]*sql.Conn, 0, db.opts.MaxOpenConns)
	defer func() {
		for _, c := range held {
			_ = c.Close() // back to the pool, idle
		}
	}()
	for len(held) < db.opts.MaxOpenConns {
		connectCtx, cancel := context.WithTimeout(ctx, db.opts.ConnectTimeout)
		c, err := db.sql.Conn(connectCtx)
		cancel()
		if err != nil {
			return fmt.Errorf("gormdb: fill the %s pool (%d of %d open): %w: %w", db.dialect, len(held), db.opts.MaxOpenConns,
				ports.ErrUnavailable, err)
		}
		held = append(held, c)
	}
	return nil
}

func (db *DB) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, db.opts.ConnectTimeout)
	defer cancel()
	return db.sql.PingContext(ctx)
}

// Close closes the pool and the replicas' pools.
func (db *DB) Close() error {
	var errs []error
	for _, r := range db.replicas {
		errs = append(errs, r.replica.Close())
	}
	errs = append(errs, db.sql.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gormdb: close %s: %w", db.dialect, err)
	}
	return nil
}
