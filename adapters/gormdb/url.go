package gormdb

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Dialect names a supported SQL database.
type Dialect string

const (
	// Postgres is PostgreSQL, reached through pgx.
	Postgres Dialect = "postgres"
	// MySQL is MySQL or MariaDB, reached through go-sql-driver/mysql.
	MySQL Dialect = "mysql"
)

// ParseURL turns RUSHGATE_DATABASE_URL into a dialect and a driver DSN:
// postgres://user:pass@host:5432/db?sslmode=disable or mysql://user:pass@host:3306/db.
func ParseURL(raw string) (Dialect, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the raw URL, password included; keep only the reason.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return "", "", fmt.Errorf("not a URL: %w", err)
	}
	switch u.Scheme {
	case "postgres", "postgresql":
		if u.Host == "" || strings.Trim(u.Path, "/") == "" {
			return "", "", fmt.Errorf("want postgres://user:pass@host:5432/db?sslmode=disable")
		}
		return Postgres, raw, nil
	case "mysql":
		db := strings.Trim(u.Path, "/")
		if u.Host == "" || db == "" {
			return "", "", fmt.Errorf("want mysql://user:pass@host:3306/db")
		}
		cfg := mysql.NewConfig()
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
		cfg.Net = "tcp"
		cfg.Addr = u.Host
		cfg.DBName = db
		cfg.ParseTime = true
		cfg.Loc = time.UTC
		// Placeholders are filled in by the driver, so a statement is one round trip instead of
		// prepare, execute and close; safe with the utf8mb4 connection charset.
		cfg.InterpolateParams = true
		cfg.Params = map[string]string{"time_zone": "'+00:00'"}
		for k, v := range u.Query() {
			cfg.Params[k] = v[0]
		}
		return MySQL, cfg.FormatDSN(), nil
	default:
		return "", "", fmt.Errorf("unsupported scheme %q: want postgres:// or mysql://", u.Scheme)
	}
}
