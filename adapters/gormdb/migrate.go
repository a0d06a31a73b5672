package gormdb

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// migrations holds the versioned schema, one folder per dialect. GORM never AutoMigrates: these
// files are the schema.
//
//go:embed migrations/postgres/*.sql migrations/mysql/*.sql
var migrations embed.FS

// How long an instance waits for another instance's migration run: polls every
// migrationLockPoll, up to migrationLockPolls times.
const (
	migrationLockPoll  = time.Second
	migrationLockPolls = 300
)

// Migrate applies the pending migrations of db's dialect. Several instances may call it at once:
// a database lock lets one apply them while the others wait, then find nothing left to do.
func Migrate(ctx context.Context, db *DB) error {
	pool := db.sql
	if db.openMigrationPool != nil {
		pool = db.openMigrationPool()
		defer pool.Close()
	}
	provider, err := migrationProvider(db.dialect, pool)
	if err != nil {
		return err
	}
	if _, err := provider.Up(ctx); err != nil {
		return translate(err, errorMeanings{op: "migrate " + string(db.dialect)})
	}
	return nil
}

// migrationProvider is goose's provider of d's migrations on pool, under the migration lock.
func migrationProvider(d Dialect, pool *sql.DB) (*goose.Provider, error) {
	files, err := fs.Sub(migrations, "migrations/"+string(d))
	if err != nil {
		return nil, fmt.Errorf("gormdb: migrations for %s: %w", d, err)
	}
	dialect, locking, err := migrationSetup(d)
	if err != nil {
		return nil, fmt.Errorf("gormdb: migration lock for %s: %w", d, err)
	}
	// Not closed: Provider.Close would close the pool, which its owner closes.
	provider, err := goose.NewProvider(dialect, pool, files, locking)
	if err != nil {
		return nil, fmt.Errorf("gormdb: load %s migrations: %w", d, err)
	}
	return provider, nil
}

// migrationSetup returns goose's dialect and the lock that serialises concurrent migration runs:
// a session advisory lock on Postgres, a lock table on MySQL, which has no session lock goose
// supports.
func migrationSetup(d Dialect) (goose.Dialect, goose.ProviderOption, error) {
	switch d {
	case Postgres:
		locker, err := lock.NewPostgresSessionLocker(
			lock.WithLockTimeout(uint64(migrationLockPoll/time.Second), migrationLockPolls))
		return goose.DialectPostgres, goose.WithSessionLocker(locker), err
	case MySQL:
		locker, err := lock.NewMySQLTableLocker(
			lock.WithTableLockTimeout(migrationLockPoll, migrationLockPolls))
		return goose.DialectMySQL, goose.WithLocker(locker), err
	default:
		return "", nil, fmt.Errorf("unsupported dialect %q", d)
	}
}
