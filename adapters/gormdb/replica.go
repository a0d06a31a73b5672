package gormdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync/atomic"
	"time"

	gormmysql "gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	"gorm.io/plugin/dbresolver"

	"github.com/rushgate/rushgate/ports"
)

// replicaRetryAfter is how long a replica that failed a read is skipped before it is tried again.
const replicaRetryAfter = time.Second

// Reads a caller marked with ports.AllowStale, made outside a transaction, run on a handle with
// gorm's dbresolver plugin: its queries go to a replica the plugin picks, anything else to the
// primary. Every other read and every write runs on DB.gorm and DB.sql, which know no replica.
// Each replica is a replicaPool that sends a read it fails to the primary instead.

// openReplicas opens a pool per replica URL (same dialect as the primary, not pinged: a replica
// that is down is skipped until it answers) and the dbresolver handle over the primary's pool.
func (db *DB) openReplicas(urls []string) error {
	dialectors := make([]gorm.Dialector, 0, len(urls))
	for i, raw := range urls {
		dialect, dsn, err := ParseURL(raw)
		if err != nil {
			return fmt.Errorf("gormdb: replica %d URL: %w", i+1, err)
		}
		host := ""
		if u, err := url.Parse(raw); err == nil {
			host = u.Host
		}
		if dialect != db.dialect {
			return fmt.Errorf("gormdb: replica at %s is %s, the primary %s", host, dialect, db.dialect)
		}
		replica, _, _, err := connect(dialect, dsn, db.opts)
		if err != nil {
			return fmt.Errorf("gormdb: configure %s replica at %s: %w", dialect, host, err)
		}
		replica.SetMaxOpenConns(db.opts.MaxOpenConns)
		replica.SetMaxIdleConns(db.opts.MaxOpenConns)
		pool := &replicaPool{replica: replica, primary: db.sql, fellBack: db.opts.ReplicaFallback}
		db.replicas = append(db.replicas, pool)
		dialectors = append(dialectors, dialectorOn(dialect, pool))
	}
	readDB, err := gorm.Open(dialectorOn(db.dialect, db.sql), gormConfig())
	if err != nil {
		return translate(err, errorMeanings{op: "initialise the replica reads"})
	}
	err = readDB.Use(dbresolver.Register(dbresolver.Config{
		Replicas: dialectors,
		Policy:   upReplicas{},
	}))
	if err != nil {
		return fmt.Errorf("gormdb: register the read replicas: %w", err)
	}
	if db.opts.Tracing != nil {
		if err := traceGorm(readDB, db.opts.Tracing); err != nil {
			return err
		}
	}
	db.readGorm = readDB
	return nil
}

// dialectorOn is the GORM dialector of dialect on an open pool. It asks the server nothing at
// initialisation, so a replica that is down when the server starts does not stop it.
func dialectorOn(dialect Dialect, pool gorm.ConnPool) gorm.Dialector {
	if dialect == MySQL {
		return gormmysql.New(gormmysql.Config{Conn: pool, SkipInitializeWithVersion: true})
	}
	return postgres.New(postgres.Config{Conn: pool})
}

// gormConfig is the configuration of every GORM handle.
func gormConfig() *gorm.Config {
	return &gorm.Config{
		Logger:                 logger.Discard, // the server logs itself
		SkipDefaultTransaction: true,           // InTx is the one way to run a transaction
		DisableAutomaticPing:   true,           // pinged in Open, within ConnectTimeout
	}
}

// readsReplica reports whether a call with ctx, which carries no transaction, may read from a
// replica: replicas are configured and the caller allowed a stale answer.
func (db *DB) readsReplica(ctx context.Context) bool {
	return db.readGorm != nil && ports.StaleAllowed(ctx)
}

// upReplicas is the dbresolver policy: a random replica among those not marked down, or any
// when all are (its replicaPool then sends the read to the primary).
type upReplicas struct{}

func (upReplicas) Resolve(pools []gorm.ConnPool) gorm.ConnPool {
	up := make([]gorm.ConnPool, 0, len(pools))
	for _, p := range pools {
		if r, ok := p.(*replicaPool); !ok || r.up() {
			up = append(up, p)
		}
	}
	if len(up) == 0 {
		up = pools
	}
	return up[rand.N(len(up))]
}

// replicaPool is one replica's connection pool. A query it cannot run there — the replica
// refuses connections, drops them, or errs — runs on the primary, and the replica is skipped for
// replicaRetryAfter; fellBack counts each query the primary ran in its place. A query that
// outlasts its deadline there is not rerun (no time is left), but the replica is skipped too.
// Statements other than queries go to the primary: nothing is ever written to a replica.
type replicaPool struct {
	replica, primary *sql.DB
	fellBack         func()
	// downUntil is when the replica may be tried again, in Unix nanoseconds; 0: it is up.
	downUntil atomic.Int64
}

var _ gorm.ConnPool = (*replicaPool)(nil)

func (p *replicaPool) up() bool { return time.Now().UnixNano() >= p.downUntil.Load() }

// failed reports whether err, from a query on the replica, is the replica's failure, which the
// primary should make good, and marks the replica down when the replica is to blame.
func (p *replicaPool) failed(ctx context.Context, err error) bool {
	if errors.Is(ctx.Err(), context.Canceled) {
		return false // the caller gave up; the replica is not to blame
	}
	p.downUntil.Store(time.Now().Add(replicaRetryAfter).UnixNano())
	return ctx.Err() == nil
}

func (p *replicaPool) fallBack() {
	if p.fellBack != nil {
		p.fellBack()
	}
}

func (p *replicaPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if p.up() {
		rows, err := p.replica.QueryContext(ctx, query, args...)
		if err == nil || !p.failed(ctx, err) {
			return rows, err
		}
	}
	p.fallBack()
	return p.primary.QueryContext(ctx, query, args...)
}

func (p *replicaPool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if p.up() {
		row := p.replica.QueryRowContext(ctx, query, args...)
		if err := row.Err(); err == nil || !p.failed(ctx, err) {
			return row
		}
	}
	p.fallBack()
	return p.primary.QueryRowContext(ctx, query, args...)
}

func (p *replicaPool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return p.primary.ExecContext(ctx, query, args...)
}

func (p *replicaPool) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.primary.PrepareContext(ctx, query)
}
