// Package testenv gives tests the real services of this machine: fresh, isolated databases on
// Postgres and MySQL, a Redis address, and a private Redis Cluster started from the machine's
// redis-server. A service that cannot be reached skips the test, and fails it when CI=true.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/rushgate/rushgate/adapters/gormdb"
)

const (
	defaultPostgres = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	defaultMySQL    = "mysql://root@127.0.0.1:3306/test"
	defaultRedis    = "127.0.0.1:6379"
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// underCI reports whether CI holds any true value (true, 1, TRUE).
func underCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// Unreachable skips the test, or fails it under CI, because a service is down.
func Unreachable(t testing.TB, service string, err error) {
	t.Helper()
	if underCI() {
		t.Fatalf("%s unreachable under CI=%s: %v", service, os.Getenv("CI"), err)
	}
	t.Skipf("%s unreachable (set CI=true to fail instead): %v", service, err)
}

// Long skips a long test under go test -short, saying why, except under CI: there every test
// runs, -short or not.
func Long(t testing.TB, why string) {
	t.Helper()
	if testing.Short() && !underCI() {
		t.Skipf("-short: %s (runs under CI=true)", why)
	}
}

// RedisAddr returns TEST_REDIS_ADDR after checking that it answers.
func RedisAddr(t testing.TB) string {
	t.Helper()
	addr := env("TEST_REDIS_ADDR", defaultRedis)
	conn, err := net.DialTimeout("tcp", addr, DependencyTimeout)
	if err != nil {
		Unreachable(t, "redis", err)
	}
	_ = conn.Close()
	return addr
}

// Database is one fresh database created for a test and dropped after it.
type Database struct {
	Dialect gormdb.Dialect
	URL     string // in RUSHGATE_DATABASE_URL form
}

// Postgres creates a fresh database on TEST_POSTGRES_DSN's server.
func Postgres(t testing.TB) Database {
	t.Helper()
	return fresh(t, env("TEST_POSTGRES_DSN", defaultPostgres))
}

// MySQL creates a fresh database on TEST_MYSQL_DSN's server.
func MySQL(t testing.TB) Database {
	t.Helper()
	return fresh(t, env("TEST_MYSQL_DSN", defaultMySQL))
}

// Databases returns a fresh database on every SQL server, keyed by dialect.
func Databases(t testing.TB) []Database {
	t.Helper()
	return []Database{Postgres(t), MySQL(t)}
}

func fresh(t testing.TB, serverURL string) Database {
	t.Helper()
	dialect, dsn, err := gormdb.ParseURL(serverURL)
	if err != nil {
		t.Fatalf("bad test database URL %q: %v", serverURL, err)
	}
	driver := map[gormdb.Dialect]string{gormdb.Postgres: "pgx", gormdb.MySQL: "mysql"}[dialect]
	admin, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatalf("open %s: %v", dialect, err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), DependencyTimeout)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		Unreachable(t, string(dialect), err)
	}
	name := "rg_" + randomHex(6)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() { drop(t, driver, dsn, dialect, name) })

	u, _ := url.Parse(serverURL)
	u.Path = "/" + name
	return Database{Dialect: dialect, URL: u.String()}
}

func drop(t testing.TB, driver, dsn string, dialect gormdb.Dialect, name string) {
	admin, err := sql.Open(driver, dsn)
	if err != nil {
		t.Errorf("drop %s: %v", name, err)
		return
	}
	defer admin.Close()
	stmt := "DROP DATABASE IF EXISTS " + name
	if dialect == gormdb.Postgres {
		stmt += " WITH (FORCE)"
	}
	// Dropping waits for the database's connections to end: longer than one query.
	ctx, cancel := context.WithTimeout(context.Background(), 6*DependencyTimeout)
	defer cancel()
	if _, err := admin.ExecContext(ctx, stmt); err != nil && !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("drop database %s: %v", name, err)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
