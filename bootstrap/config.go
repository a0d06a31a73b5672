// Package bootstrap wires rushgate with uber-go/fx: configuration, the choice of infrastructure
// (memory or SQL + Redis), the application services and the HTTP server's lifecycle. fx lives
// here only; every constructor it calls is plain Go.
package bootstrap

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/adapters/redis"
)

// Config is every setting, read from RUSHGATE_* environment variables (and tracing's standard
// OTEL_* ones) once at start, grouped by concern. Each group sits with the wiring that reads
// it, parses and validates on its own, and writes each of its defaults once, in its
// setDefaults: the env tags name the variables and carry no defaults. A new group is one field
// here.
type Config struct {
	Server   ServerConfig
	Database DatabaseConfig
	Redis    RedisConfig
	Auth     AuthConfig
	Guard    GuardConfig
	Commerce CommerceConfig
	Outbox   OutboxConfig
	Storage  StorageConfig
	Upload   UploadConfig
	Queue    QueueConfig
	Tracing  TracingConfig
	Raffle   RaffleConfig
}

// settingsGroup is what every group of Config does.
type settingsGroup interface {
	// setDefaults sets the group's settings that have a default to it.
	setDefaults()
	// Validate checks values the types alone do not.
	Validate() error
}

// groups are c's groups in field order.
func (c *Config) groups() []settingsGroup {
	fields := reflect.ValueOf(c).Elem()
	groups := make([]settingsGroup, fields.NumField())
	for i := range fields.NumField() {
		groups[i] = fields.Field(i).Addr().Interface().(settingsGroup)
	}
	return groups
}

// ServerConfig is the HTTP server and the process around it.
type ServerConfig struct {
	// Addr is the listen address, host:port.
	Addr string `env:"RUSHGATE_ADDR"`
	// InstanceID names this instance in logs and starts the ids of its push brokers, so it is
	// printable ASCII without '|' or braces (validInstanceID). Unset: host name and process id.
	InstanceID string `env:"RUSHGATE_INSTANCE_ID"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `env:"RUSHGATE_LOG_LEVEL"`
	// AccessLogLevel is the level of the access lines (debug takes them out of the info logs),
	// and AccessLogSample keeps one in that many lines of requests answered below 400.
	AccessLogLevel  string `env:"RUSHGATE_ACCESS_LOG_LEVEL"`
	AccessLogSample int    `env:"RUSHGATE_ACCESS_LOG_SAMPLE"`
	// MaxBodyBytes caps a request body (413 beyond).
	MaxBodyBytes int64 `env:"RUSHGATE_MAX_BODY_BYTES"`
	// ShutdownTimeout bounds the graceful stop: in-flight requests finish, locks are released.
	ShutdownTimeout time.Duration `env:"RUSHGATE_SHUTDOWN_TIMEOUT"`
	// ReadHeaderTimeout bounds reading a request's headers and ReadTimeout its headers and body
	// (408 beyond), so a client that sends slowly, or declares a body it never sends, cannot hold
	// a connection. The header timeout is at most the read timeout.
	ReadHeaderTimeout time.Duration `env:"RUSHGATE_READ_HEADER_TIMEOUT"`
	ReadTimeout       time.Duration `env:"RUSHGATE_READ_TIMEOUT"`
}

func (c *ServerConfig) setDefaults() {
	c.Addr = ":8080"
	c.LogLevel, c.AccessLogLevel = "info", "info"
	c.AccessLogSample = 1 // every line
	c.MaxBodyBytes = rghttp.DefaultMaxBodyBytes
	c.ShutdownTimeout = 15 * time.Second
	c.ReadHeaderTimeout, c.ReadTimeout = 5*time.Second, 10*time.Second
}

// DatabaseConfig is the SQL database holding the data.
type DatabaseConfig struct {
	// URL is postgres://… or mysql://…. Unset: in-memory, nothing persisted.
	URL string `env:"RUSHGATE_DATABASE_URL"`
	// ReplicaURLs are read replicas of URL, comma-separated, same driver: they serve the reads
	// that may be a moment stale. Unset: none.
	ReplicaURLs []string `env:"RUSHGATE_DATABASE_REPLICA_URLS" envSeparator:","`
	// Timeout bounds connecting and each transaction (503 beyond).
	Timeout time.Duration `env:"RUSHGATE_DB_TIMEOUT"`
	// MaxOpenConns is the connection pool's size.
	MaxOpenConns int `env:"RUSHGATE_DB_MAX_OPEN_CONNS"`
	// Migrate applies the schema migrations when serve starts.
	Migrate bool `env:"RUSHGATE_MIGRATE"`
}

func (c *DatabaseConfig) setDefaults() {
	c.Timeout = gormdb.DefaultTxTimeout
	c.MaxOpenConns = gormdb.DefaultMaxOpenConns
	c.Migrate = true
}

// RedisConfig is the Redis that coordinates instances: locks and idempotency records.
type RedisConfig struct {
	// URL is redis://[:pass@]host:port/db. Unset: in-memory, one instance only.
	URL string `env:"RUSHGATE_REDIS_URL"`
	// Timeout bounds dialing, each read and each write (503 beyond).
	Timeout time.Duration `env:"RUSHGATE_REDIS_TIMEOUT"`
	// KeyPrefix starts the waiting rooms' keys (push streams included), so that two test runs
	// share one Redis without sharing rooms; locks and idempotency records keep their own
	// "rushgate:" prefixes.
	KeyPrefix string `env:"RUSHGATE_REDIS_KEY_PREFIX"`
}

func (c *RedisConfig) setDefaults() {
	c.Timeout = time.Second
	c.KeyPrefix = redis.WaitingRoomKeyPrefix
}

// AuthConfig is how bearer tokens are checked.
type AuthConfig struct {
	// JWTSecret is the HS256 secret, at least 32 bytes. Unset: generated at start, for this
	// process only.
	JWTSecret string `env:"RUSHGATE_JWT_SECRET"`
}

func (c *AuthConfig) setDefaults() {}

// DefaultConfig is every setting at its default, as with an empty environment.
func DefaultConfig() Config {
	var cfg Config
	for _, group := range cfg.groups() {
		group.setDefaults()
	}
	return cfg
}

// LoadConfig reads the environment, applies overrides (a command line's flags, which win over
// the variables they stand for) and validates the result. Its error is one line naming the
// variable and what is wrong with it.
func LoadConfig(overrides ...func(*Config)) (Config, error) {
	cfg, err := parseConfig(env.Options{})
	if err != nil {
		return Config{}, err
	}
	for _, override := range overrides {
		override(&cfg)
	}
	return cfg, cfg.Validate()
}

// parseConfig reads every group from opts' environment (the process's when opts has none) over
// the defaults: a variable unset or empty keeps its default.
func parseConfig(opts env.Options) (Config, error) {
	cfg := DefaultConfig()
	for _, group := range cfg.groups() {
		if err := env.ParseWithOptions(group, opts); err != nil {
			return Config{}, describeEnvError(reflect.TypeOf(group).Elem(), err)
		}
	}
	return cfg, nil
}

// Validate checks values the types alone do not, group by group.
func (c Config) Validate() error {
	for _, group := range c.groups() {
		if err := group.Validate(); err != nil {
			return err
		}
	}
	// Across groups, checked here so that nothing is opened or logged before it is refused.
	if c.Queue.Role != RoleAll && c.Redis.URL == "" {
		return fmt.Errorf("RUSHGATE_ROLE: %s needs RUSHGATE_REDIS_URL, where brokers and dispatchers meet", c.Queue.Role)
	}
	return nil
}

// Validate checks the server settings.
func (c ServerConfig) Validate() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("RUSHGATE_ADDR: %q is not host:port", c.Addr)
	}
	if err := validInstanceID(c.InstanceID); err != nil {
		return fmt.Errorf("RUSHGATE_INSTANCE_ID: %q %w", c.InstanceID, err)
	}
	for _, level := range []struct{ name, value string }{
		{"RUSHGATE_LOG_LEVEL", c.LogLevel},
		{"RUSHGATE_ACCESS_LOG_LEVEL", c.AccessLogLevel},
	} {
		if _, err := parseLevel(level.value); err != nil {
			return fmt.Errorf("%s: %q is not debug, info, warn or error", level.name, level.value)
		}
	}
	if err := allPositive(
		positive{"RUSHGATE_ACCESS_LOG_SAMPLE", c.AccessLogSample > 0},
		positive{"RUSHGATE_MAX_BODY_BYTES", c.MaxBodyBytes > 0},
		positive{"RUSHGATE_READ_HEADER_TIMEOUT", c.ReadHeaderTimeout > 0},
		positive{"RUSHGATE_READ_TIMEOUT", c.ReadTimeout > 0},
		positive{"RUSHGATE_SHUTDOWN_TIMEOUT", c.ShutdownTimeout > 0},
	); err != nil {
		return err
	}
	if c.ReadHeaderTimeout > c.ReadTimeout {
		return fmt.Errorf("RUSHGATE_READ_HEADER_TIMEOUT: %v is longer than RUSHGATE_READ_TIMEOUT %v", c.ReadHeaderTimeout, c.ReadTimeout)
	}
	return nil
}

// validInstanceID refuses an instance id its push broker cannot be routed by. The id starts the
// broker's: connection owners are "<brokerID>|<connectionID>|" and admissions go to the broker
// before the first '|' (ports.OwnerBroker), and the broker's Redis keys end in a {brokerID}
// hash tag, which a brace would move. Control characters and non-ASCII have no place in logs'
// instance field either. Empty is the default, host name and process id.
func validInstanceID(id string) error {
	for _, r := range id {
		switch {
		case r < ' ' || r > '~':
			return errors.New("holds a character other than printable ASCII")
		case r == '|':
			return errors.New("holds a '|', which ends a broker id in its connections' owners")
		case r == '{' || r == '}':
			return errors.New("holds a brace, which would move the {brokerId} hash tag of its broker's keys")
		}
	}
	return nil
}

// parseLevel reads a log level setting: debug, info, warn or error, in any letter case.
func parseLevel(value string) (slog.Level, error) {
	var level slog.Level
	switch strings.ToLower(value) {
	case "debug", "info", "warn", "error":
		return level, level.UnmarshalText([]byte(value))
	default:
		return level, fmt.Errorf("unknown log level %q", value)
	}
}

// Validate checks the database settings.
func (c DatabaseConfig) Validate() error {
	if c.URL != "" {
		if _, _, err := gormdb.ParseURL(c.URL); err != nil {
			return fmt.Errorf("RUSHGATE_DATABASE_URL: %w", err)
		}
	}
	if err := c.validateReplicas(); err != nil {
		return fmt.Errorf("RUSHGATE_DATABASE_REPLICA_URLS: %w", err)
	}
	return allPositive(
		positive{"RUSHGATE_DB_TIMEOUT", c.Timeout > 0},
		positive{"RUSHGATE_DB_MAX_OPEN_CONNS", c.MaxOpenConns > 0},
	)
}

// validateReplicas checks that each replica URL parses and names the primary's driver. The
// URLs are not repeated: they may hold passwords.
func (c DatabaseConfig) validateReplicas() error {
	if len(c.ReplicaURLs) == 0 {
		return nil
	}
	if c.URL == "" {
		return errors.New("replicas need RUSHGATE_DATABASE_URL, the primary they copy")
	}
	primary, _, _ := gormdb.ParseURL(c.URL) // checked first
	for i, raw := range c.ReplicaURLs {
		dialect, _, err := gormdb.ParseURL(raw)
		if err != nil {
			return fmt.Errorf("replica %d: %w", i+1, err)
		}
		if dialect != primary {
			return fmt.Errorf("replica %d is %s, but RUSHGATE_DATABASE_URL is %s: want the same driver", i+1, dialect, primary)
		}
	}
	return nil
}

// Validate checks the Redis settings.
func (c RedisConfig) Validate() error {
	if c.URL != "" {
		if err := redis.ParseURL(c.URL); err != nil {
			return fmt.Errorf("RUSHGATE_REDIS_URL: %w", err)
		}
	}
	if err := validKeyPrefix(c.KeyPrefix); err != nil {
		return fmt.Errorf("RUSHGATE_REDIS_KEY_PREFIX: %q %w", c.KeyPrefix, err)
	}
	return allPositive(positive{"RUSHGATE_REDIS_TIMEOUT", c.Timeout > 0})
}

// validKeyPrefix refuses a key prefix that is empty, holds anything but printable ASCII, or
// holds a brace: the keys carry {eventId} hash tags, which a brace in the prefix would move.
func validKeyPrefix(prefix string) error {
	if prefix == "" {
		return errors.New("is empty")
	}
	for _, r := range prefix {
		if r < ' ' || r > '~' {
			return errors.New("holds a character other than printable ASCII")
		}
		if r == '{' || r == '}' {
			return errors.New("holds a brace, which would move the keys' {eventId} hash tags")
		}
	}
	return nil
}

// Validate checks the authentication settings.
func (c AuthConfig) Validate() error {
	if c.JWTSecret != "" && len(c.JWTSecret) < 32 {
		return errors.New("RUSHGATE_JWT_SECRET: must be at least 32 bytes")
	}
	return nil
}

// positive is a variable and whether its value is above zero.
type positive struct {
	name string
	ok   bool
}

// allPositive names the first variable that is not positive.
func allPositive(checks ...positive) error {
	for _, p := range checks {
		if !p.ok {
			return fmt.Errorf("%s: must be positive", p.name)
		}
	}
	return nil
}

// instanceID names this process among several serving the same data.
func (c ServerConfig) instanceID() string {
	if c.InstanceID != "" {
		return c.InstanceID
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// describeEnvError turns the env library's error on parsing group into "VARIABLE: problem".
func describeEnvError(group reflect.Type, err error) error {
	var agg env.AggregateError
	if errors.As(err, &agg) && len(agg.Errors) > 0 {
		err = agg.Errors[0]
	}
	var pe env.ParseError
	if errors.As(err, &pe) {
		if f, ok := group.FieldByName(pe.Name); ok {
			return fmt.Errorf("%s: not a valid %s: %w", f.Tag.Get("env"), pe.Type, pe.Err)
		}
	}
	return err
}
