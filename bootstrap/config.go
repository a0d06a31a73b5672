// Package bootstrap wires rushgate with uber-go/fx: configuration, the choice of infrastructure
// (memory or SQL + Redis), the application services and the HTTP server's lifecycle. fx lives
// here only; every constructor it calls is plain Go.
package bootstrap

import (
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/adapters/redis"
)

// Config is every setting, read from RUSHGATE_* environment variables once at start.
type Config struct {
	Addr        string `env:"RUSHGATE_ADDR" envDefault:":8080"`
	DatabaseURL string `env:"RUSHGATE_DATABASE_URL"` // unset: in-memory
	RedisURL    string `env:"RUSHGATE_REDIS_URL"`    // unset: in-memory
	JWTSecret   string `env:"RUSHGATE_JWT_SECRET"`   // unset: generated at start
	InstanceID  string `env:"RUSHGATE_INSTANCE_ID"`  // unset: host name and process id
	Migrate     bool   `env:"RUSHGATE_MIGRATE" envDefault:"true"`
	LogLevel    string `env:"RUSHGATE_LOG_LEVEL" envDefault:"info"`

	DBTimeout      time.Duration `env:"RUSHGATE_DB_TIMEOUT" envDefault:"1s"`
	DBMaxOpenConns int           `env:"RUSHGATE_DB_MAX_OPEN_CONNS" envDefault:"20"`
	RedisTimeout   time.Duration `env:"RUSHGATE_REDIS_TIMEOUT" envDefault:"1s"`

	LockTTL          time.Duration `env:"RUSHGATE_LOCK_TTL" envDefault:"1s"`
	LockBaseDelay    time.Duration `env:"RUSHGATE_LOCK_BASE_DELAY" envDefault:"100ms"`
	LockRetries      int           `env:"RUSHGATE_LOCK_RETRIES" envDefault:"5"`
	LockMaxBatch     int           `env:"RUSHGATE_LOCK_MAX_BATCH" envDefault:"64"`
	IdempotencyTTL   time.Duration `env:"RUSHGATE_IDEMPOTENCY_TTL" envDefault:"1h"`
	IdempotencyLease time.Duration `env:"RUSHGATE_IDEMPOTENCY_LEASE" envDefault:"30s"`
	// MarkerPruneInterval is how often idempotency markers older than IdempotencyTTL are deleted.
	MarkerPruneInterval time.Duration `env:"RUSHGATE_MARKER_PRUNE_INTERVAL" envDefault:"10m"`

	MaxBodyBytes    int64         `env:"RUSHGATE_MAX_BODY_BYTES" envDefault:"1048576"`
	ShutdownTimeout time.Duration `env:"RUSHGATE_SHUTDOWN_TIMEOUT" envDefault:"15s"`

	// ReadHeaderTimeout bounds reading a request's headers and ReadTimeout its headers and body,
	// so a client that sends slowly, or declares a body it never sends, cannot hold a connection.
	ReadHeaderTimeout time.Duration `env:"RUSHGATE_READ_HEADER_TIMEOUT" envDefault:"5s"`
	ReadTimeout       time.Duration `env:"RUSHGATE_READ_TIMEOUT" envDefault:"10s"`
}

// DefaultConfig is every setting at its default, as with an empty environment.
func DefaultConfig() Config {
	cfg, err := env.ParseAsWithOptions[Config](env.Options{Environment: map[string]string{}})
	if err != nil {
		panic(fmt.Sprintf("bootstrap: the default configuration does not parse: %v", err))
	}
	return cfg
}

// LoadConfig reads and validates the environment. Its error is one line naming the variable
// and what is wrong with it.
func LoadConfig() (Config, error) {
	cfg, err := env.ParseAs[Config]()
	if err != nil {
		return Config{}, describeEnvError(err)
	}
	return cfg, cfg.Validate()
}

// Validate checks values the types alone do not.
func (c Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("RUSHGATE_ADDR: %q is not host:port", c.Addr)
	}
	if c.DatabaseURL != "" {
		if _, _, err := gormdb.ParseURL(c.DatabaseURL); err != nil {
			return fmt.Errorf("RUSHGATE_DATABASE_URL: %w", err)
		}
	}
	if c.RedisURL != "" {
		if _, err := redis.NewClient(c.RedisURL, redis.Options{}); err != nil {
			return fmt.Errorf("RUSHGATE_REDIS_URL: %w", err)
		}
	}
	if c.JWTSecret != "" && len(c.JWTSecret) < 32 {
		return errors.New("RUSHGATE_JWT_SECRET: must be at least 32 bytes")
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("RUSHGATE_LOG_LEVEL: %q is not debug, info, warn or error", c.LogLevel)
	}
	if c.ReadHeaderTimeout > c.ReadTimeout {
		return fmt.Errorf("RUSHGATE_READ_HEADER_TIMEOUT: %v is longer than RUSHGATE_READ_TIMEOUT %v", c.ReadHeaderTimeout, c.ReadTimeout)
	}
	if c.IdempotencyLease > c.IdempotencyTTL {
		return fmt.Errorf("RUSHGATE_IDEMPOTENCY_LEASE: %v is longer than RUSHGATE_IDEMPOTENCY_TTL %v", c.IdempotencyLease, c.IdempotencyTTL)
	}
	positive := []struct {
		name string
		ok   bool
	}{
		{"RUSHGATE_DB_TIMEOUT", c.DBTimeout > 0},
		{"RUSHGATE_DB_MAX_OPEN_CONNS", c.DBMaxOpenConns > 0},
		{"RUSHGATE_REDIS_TIMEOUT", c.RedisTimeout > 0},
		{"RUSHGATE_LOCK_TTL", c.LockTTL > 0},
		{"RUSHGATE_LOCK_BASE_DELAY", c.LockBaseDelay > 0},
		{"RUSHGATE_LOCK_RETRIES", c.LockRetries > 0},
		{"RUSHGATE_LOCK_MAX_BATCH", c.LockMaxBatch > 0},
		{"RUSHGATE_IDEMPOTENCY_TTL", c.IdempotencyTTL > 0},
		{"RUSHGATE_IDEMPOTENCY_LEASE", c.IdempotencyLease > 0},
		{"RUSHGATE_MARKER_PRUNE_INTERVAL", c.MarkerPruneInterval > 0},
		{"RUSHGATE_MAX_BODY_BYTES", c.MaxBodyBytes > 0},
		{"RUSHGATE_READ_HEADER_TIMEOUT", c.ReadHeaderTimeout > 0},
		{"RUSHGATE_READ_TIMEOUT", c.ReadTimeout > 0},
		{"RUSHGATE_SHUTDOWN_TIMEOUT", c.ShutdownTimeout > 0},
	}
	for _, p := range positive {
		if !p.ok {
			return fmt.Errorf("%s: must be positive", p.name)
		}
	}
	return nil
}

// instanceID names this process among several serving the same data.
func (c Config) instanceID() string {
	if c.InstanceID != "" {
		return c.InstanceID
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// describeEnvError turns the env library's error into "VARIABLE: problem".
func describeEnvError(err error) error {
	var agg env.AggregateError
	if errors.As(err, &agg) && len(agg.Errors) > 0 {
		err = agg.Errors[0]
	}
	var pe env.ParseError
	if errors.As(err, &pe) {
		if f, ok := reflect.TypeOf(Config{}).FieldByName(pe.Name); ok {
			return fmt.Errorf("%s: not a valid %s: %w", f.Tag.Get("env"), pe.Type, pe.Err)
		}
	}
	return err
}
