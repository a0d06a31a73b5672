// Package bootstrap wires rushgate with uber-go/fx: configuration, the choice of infrastructure
// (memory or SQL + Redis), the application services and the HTTP server's lifecycle. fx lives
// here only; every constructor it calls is plain Go.
package bootstrap

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/domain/commerce"
)

// Config is every setting, read from RUSHGATE_* environment variables (and tracing's standard
// OTEL_* ones) once at start, grouped by concern. Each group parses and validates on its own.
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
}

// ServerConfig is the HTTP server and the process around it.
type ServerConfig struct {
	// Addr is the listen address, host:port. Default ":8080".
	Addr string `env:"RUSHGATE_ADDR" envDefault:":8080"`
	// InstanceID names this instance in logs. Unset: host name and process id.
	InstanceID string `env:"RUSHGATE_INSTANCE_ID"`
	// LogLevel is debug, info, warn or error. Default "info".
	LogLevel string `env:"RUSHGATE_LOG_LEVEL" envDefault:"info"`
	// AccessLogLevel is the level of the access lines (debug takes them out of the info logs),
	// and AccessLogSample keeps one in that many lines of requests answered below 400.
	// Defaults "info" and 1 (every line).
	AccessLogLevel  string `env:"RUSHGATE_ACCESS_LOG_LEVEL" envDefault:"info"`
	AccessLogSample int    `env:"RUSHGATE_ACCESS_LOG_SAMPLE" envDefault:"1"`
	// MaxBodyBytes caps a request body (413 beyond). Default 1 MiB.
	MaxBodyBytes int64 `env:"RUSHGATE_MAX_BODY_BYTES" envDefault:"1048576"`
	// ShutdownTimeout bounds the graceful stop: in-flight requests finish, locks are released.
	// Default 15s.
	ShutdownTimeout time.Duration `env:"RUSHGATE_SHUTDOWN_TIMEOUT" envDefault:"15s"`
	// ReadHeaderTimeout bounds reading a request's headers and ReadTimeout its headers and body
	// (408 beyond), so a client that sends slowly, or declares a body it never sends, cannot hold
	// a connection. Defaults 5s and 10s; the header timeout is at most the read timeout.
	ReadHeaderTimeout time.Duration `env:"RUSHGATE_READ_HEADER_TIMEOUT" envDefault:"5s"`
	ReadTimeout       time.Duration `env:"RUSHGATE_READ_TIMEOUT" envDefault:"10s"`
}

// DatabaseConfig is the SQL database holding the data.
type DatabaseConfig struct {
	// URL is postgres://… or mysql://…. Unset: in-memory, nothing persisted.
	URL string `env:"RUSHGATE_DATABASE_URL"`
	// Timeout bounds connecting and each transaction (503 beyond). Default 1s.
	Timeout time.Duration `env:"RUSHGATE_DB_TIMEOUT" envDefault:"1s"`
	// MaxOpenConns is the connection pool's size. Default 20.
	MaxOpenConns int `env:"RUSHGATE_DB_MAX_OPEN_CONNS" envDefault:"20"`
	// Migrate applies the schema migrations when serve starts. Default true.
	Migrate bool `env:"RUSHGATE_MIGRATE" envDefault:"true"`
}

// RedisConfig is the Redis that coordinates instances: locks and idempotency records.
type RedisConfig struct {
	// URL is redis://[:pass@]host:port/db. Unset: in-memory, one instance only.
	URL string `env:"RUSHGATE_REDIS_URL"`
	// Timeout bounds dialing, each read and each write (503 beyond). Default 1s.
	Timeout time.Duration `env:"RUSHGATE_REDIS_TIMEOUT" envDefault:"1s"`
	// KeyPrefix starts the waiting rooms' keys (push streams included), so that two test runs
	// share one Redis without sharing rooms; locks and idempotency records keep their own
	// "rushgate:" prefixes. Default redis.WaitingRoomKeyPrefix, "rushgate:wr:".
	KeyPrefix string `env:"RUSHGATE_REDIS_KEY_PREFIX" envDefault:"rushgate:wr:"`
}

// AuthConfig is how bearer tokens are checked.
type AuthConfig struct {
	// JWTSecret is the HS256 secret, at least 32 bytes. Unset: generated at start, for this
	// process only.
	JWTSecret string `env:"RUSHGATE_JWT_SECRET"`
}

// GuardConfig is the guard of every write: distributed locks, their backoff and batching, and
// idempotency keys.
type GuardConfig struct {
	// LockTTL is a distributed lock's expiry. Default 1s.
	LockTTL time.Duration `env:"RUSHGATE_LOCK_TTL" envDefault:"1s"`
	// LockBaseDelay is the backoff base: base × 2^attempt plus jitter. Default 100ms.
	LockBaseDelay time.Duration `env:"RUSHGATE_LOCK_BASE_DELAY" envDefault:"100ms"`
	// LockRetries is how many lock attempts follow the first. Default 5.
	LockRetries int `env:"RUSHGATE_LOCK_RETRIES" envDefault:"5"`
	// LockMaxBatch is the most requests one lock hold serves in one transaction; 1 turns
	// combining off. Default 64.
	LockMaxBatch int `env:"RUSHGATE_LOCK_MAX_BATCH" envDefault:"64"`
	// IdempotencyTTL is how long a key answers retries. Default 1h.
	IdempotencyTTL time.Duration `env:"RUSHGATE_IDEMPOTENCY_TTL" envDefault:"1h"`
	// IdempotencyLease is how long an IN_PROGRESS key blocks before a retry may take over; at
	// most IdempotencyTTL. Default 30s.
	IdempotencyLease time.Duration `env:"RUSHGATE_IDEMPOTENCY_LEASE" envDefault:"30s"`
	// MarkerPruneInterval is how often idempotency markers older than IdempotencyTTL are
	// deleted. Default 10m.
	MarkerPruneInterval time.Duration `env:"RUSHGATE_MARKER_PRUNE_INTERVAL" envDefault:"10m"`
}

// CommerceConfig is points and coupons.
type CommerceConfig struct {
	// ChargeMax is the largest single charge of points, at most 2^53. Default 10,000,000.
	ChargeMax int64 `env:"RUSHGATE_CHARGE_MAX" envDefault:"10000000"`
	// CouponIssueRetries is how many times a batch of coupon issues is retried after an
	// optimistic version conflict before its requests hear COUPON_ISSUE_FAILED. Default 3.
	CouponIssueRetries int `env:"RUSHGATE_COUPON_ISSUE_RETRIES" envDefault:"3"`
	// TopProductsFreshFor is how long one read of the top products answers every request.
	// Default 1s.
	TopProductsFreshFor time.Duration `env:"RUSHGATE_TOP_PRODUCTS_FRESH_FOR" envDefault:"1s"`
	// TopProductsTimeout bounds the top products' read; beyond it the answer is an empty list.
	// Default 1s.
	TopProductsTimeout time.Duration `env:"RUSHGATE_TOP_PRODUCTS_TIMEOUT" envDefault:"1s"`
}

// OutboxConfig is the delivery of paid orders to the data platform and the alerts when one
// cannot be delivered.
type OutboxConfig struct {
	// DataPlatformURL receives each paid order as a JSON POST. Unset: a platform that logs and
	// accepts.
	DataPlatformURL string `env:"RUSHGATE_DATAPLATFORM_URL"`
	// DataPlatformTimeout bounds one delivery. Default 3s.
	DataPlatformTimeout time.Duration `env:"RUSHGATE_DATAPLATFORM_TIMEOUT" envDefault:"3s"`
	// Interval is how often the relay sends the due messages. Default 1m.
	Interval time.Duration `env:"RUSHGATE_OUTBOX_INTERVAL" envDefault:"1m"`
	// Backoff is the waits before retries 1, 2 and 3 (comma-separated); a message failing once
	// more is FAILED. Default 1m,5m,30m.
	Backoff []time.Duration `env:"RUSHGATE_OUTBOX_BACKOFF" envDefault:"1m,5m,30m" envSeparator:","`
	// AlertWebhookURL receives alerts as JSON POSTs. Unset: alerts go to the log.
	AlertWebhookURL string `env:"RUSHGATE_ALERT_WEBHOOK_URL"`
}

// StorageConfig is where uploaded photos go: an S3 bucket when RUSHGATE_S3_BUCKET is set, else
// files under DataDir uploaded through rushgate's own signed route.
type StorageConfig struct {
	// S3Endpoint is the S3 API's base URL, e.g. http://127.0.0.1:7070. Unset: AWS's endpoint of
	// the region.
	S3Endpoint string `env:"RUSHGATE_S3_ENDPOINT"`
	// S3Bucket selects S3 storage. Unset: local disk under RUSHGATE_DATA_DIR.
	S3Bucket string `env:"RUSHGATE_S3_BUCKET"`
	// S3Region is the bucket's region. Default us-east-1.
	S3Region string `env:"RUSHGATE_S3_REGION" envDefault:"us-east-1"`
	// S3AccessKey and S3SecretKey are the credentials presigned URLs are signed with.
	S3AccessKey string `env:"RUSHGATE_S3_ACCESS_KEY"`
	S3SecretKey string `env:"RUSHGATE_S3_SECRET_KEY"`
	// S3PathStyle addresses the bucket in the path, as S3-compatible servers usually need.
	S3PathStyle bool `env:"RUSHGATE_S3_PATH_STYLE"`
	// S3Timeout bounds each call to S3 (503 beyond). Default 1s.
	S3Timeout time.Duration `env:"RUSHGATE_S3_TIMEOUT" envDefault:"1s"`
	// DataDir holds local uploads. Unset: rushgate-uploads under the OS temp directory.
	DataDir string `env:"RUSHGATE_DATA_DIR"`
	// PublicURL is the base of local upload URLs, as clients reach this server. Unset: http://
	// and the address the server listens on.
	PublicURL string `env:"RUSHGATE_PUBLIC_URL"`
}

// UploadConfig bounds uploads and their sessions.
type UploadConfig struct {
	// MaxBytes is the largest file a session accepts. Default 10 MiB.
	MaxBytes int64 `env:"RUSHGATE_UPLOAD_MAX_BYTES" envDefault:"10485760"`
	// URLExpiry is how long a presigned upload URL works. Default 5m.
	URLExpiry time.Duration `env:"RUSHGATE_UPLOAD_URL_EXPIRY" envDefault:"5m"`
	// SessionExpiry is how old a PENDING session may get before it is refused and expired.
	// Default 30m.
	SessionExpiry time.Duration `env:"RUSHGATE_UPLOAD_SESSION_EXPIRY" envDefault:"30m"`
	// ExpiryInterval is how often the expiry worker runs. Default 1m.
	ExpiryInterval time.Duration `env:"RUSHGATE_EXPIRY_INTERVAL" envDefault:"1m"`
}

// QueueConfig is the waiting room (SPEC §3).
type QueueConfig struct {
	// Tick is how often the background pass reconciles expired tokens and idle users, repairs
	// the seat counters and measures admission rates. Default 1s.
	Tick time.Duration `env:"RUSHGATE_QUEUE_TICK" envDefault:"1s"`
	// IdleTimeout drops a waiting user who has not polled for this long. Default 2m.
	IdleTimeout time.Duration `env:"RUSHGATE_QUEUE_IDLE_TIMEOUT" envDefault:"2m"`
	// PollInterval is the status poll period clients are asked for (refreshIntervalSeconds);
	// shorter than IdleTimeout. Default 2s.
	PollInterval time.Duration `env:"RUSHGATE_QUEUE_POLL_INTERVAL" envDefault:"2s"`
	// Role is what this instance runs of the push mode: "all" (default), "broker" (the SSE
	// connections) or "dispatcher" (promotion and routing). `rushgate serve --role` sets it.
	Role string `env:"RUSHGATE_ROLE" envDefault:"all"`
	// ReconnectGrace is how long a disconnected push user keeps the place or the admission;
	// 0 applies the seed's disconnect rules at once. Default 10s.
	ReconnectGrace time.Duration `env:"RUSHGATE_RECONNECT_GRACE" envDefault:"10s"`
	// BrokerHeartbeatTimeout: a broker silent this long is dead, and its users' slots come
	// back. Default 10s.
	BrokerHeartbeatTimeout time.Duration `env:"RUSHGATE_BROKER_HEARTBEAT_TIMEOUT" envDefault:"10s"`
	// SSEHeartbeat is the period of the comment lines that keep proxies from closing an SSE
	// stream. Default 15s.
	SSEHeartbeat time.Duration `env:"RUSHGATE_SSE_HEARTBEAT" envDefault:"15s"`
	// PromotionWorkers promote events in parallel on a dispatcher. Default 4.
	PromotionWorkers int `env:"RUSHGATE_PROMOTION_WORKERS" envDefault:"4"`
}

// Roles of an instance (QueueConfig.Role).
const (
	RoleAll        = "all"
	RoleBroker     = "broker"
	RoleDispatcher = "dispatcher"
)

// runsBroker and runsDispatcher tell what the instance's role runs.
func (c QueueConfig) runsBroker() bool     { return c.Role != RoleDispatcher }
func (c QueueConfig) runsDispatcher() bool { return c.Role != RoleBroker }

// DefaultConfig is every setting at its default, as with an empty environment.
func DefaultConfig() Config {
	cfg, err := parseConfig(env.Options{Environment: map[string]string{}})
	if err != nil {
		panic(fmt.Sprintf("bootstrap: the default configuration does not parse: %v", err))
	}
	return cfg
}

// LoadConfig reads and validates the environment. Its error is one line naming the variable
// and what is wrong with it.
func LoadConfig() (Config, error) {
	cfg, err := parseConfig(env.Options{})
	if err != nil {
		return Config{}, err
	}
	return cfg, cfg.Validate()
}

// parseConfig parses every group from opts' environment (the process's when opts has none).
func parseConfig(opts env.Options) (Config, error) {
	var cfg Config
	var err error
	if cfg.Server, err = parseGroup[ServerConfig](opts); err != nil {
		return Config{}, err
	}
	if cfg.Database, err = parseGroup[DatabaseConfig](opts); err != nil {
		return Config{}, err
	}
	if cfg.Redis, err = parseGroup[RedisConfig](opts); err != nil {
		return Config{}, err
	}
	if cfg.Auth, err = parseGroup[AuthConfig](opts); err != nil {
		return Config{}, err
	}
	if cfg.Guard, err = parseGroup[GuardConfig](opts); err != nil {
		return Config{}, err
	}
	if cfg.Commerce, err = parseGroup[CommerceConfig](opts); err != nil {
		return Config{}, err
	}
	if cfg.Outbox, err = parseGroup[OutboxConfig](opts); err != nil {
		return Config{}, err
	}
	if cfg.Storage, err = parseGroup[StorageConfig](opts); err != nil {
		return Config{}, err
	}
	if cfg.Upload, err = parseGroup[UploadConfig](opts); err != nil {
		return Config{}, err
	}
	if cfg.Queue, err = parseGroup[QueueConfig](opts); err != nil {
		return Config{}, err
	}
	if cfg.Tracing, err = parseGroup[TracingConfig](opts); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// parseGroup parses one group, its error described as "VARIABLE: problem".
func parseGroup[T any](opts env.Options) (T, error) {
	group, err := env.ParseAsWithOptions[T](opts)
	if err != nil {
		var zero T
		return zero, describeEnvError(reflect.TypeFor[T](), err)
	}
	return group, nil
}

// Validate checks values the types alone do not, group by group.
func (c Config) Validate() error {
	for _, group := range []interface{ Validate() error }{c.Server, c.Database, c.Redis, c.Auth, c.Guard, c.Commerce, c.Outbox, c.Storage, c.Upload, c.Queue, c.Tracing} {
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
	return allPositive(
		positive{"RUSHGATE_DB_TIMEOUT", c.Timeout > 0},
		positive{"RUSHGATE_DB_MAX_OPEN_CONNS", c.MaxOpenConns > 0},
	)
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

// Validate checks the guard settings.
func (c GuardConfig) Validate() error {
	if err := allPositive(
		positive{"RUSHGATE_LOCK_TTL", c.LockTTL > 0},
		positive{"RUSHGATE_LOCK_BASE_DELAY", c.LockBaseDelay > 0},
		positive{"RUSHGATE_LOCK_RETRIES", c.LockRetries > 0},
		positive{"RUSHGATE_LOCK_MAX_BATCH", c.LockMaxBatch > 0},
		positive{"RUSHGATE_IDEMPOTENCY_TTL", c.IdempotencyTTL > 0},
		positive{"RUSHGATE_IDEMPOTENCY_LEASE", c.IdempotencyLease > 0},
		positive{"RUSHGATE_MARKER_PRUNE_INTERVAL", c.MarkerPruneInterval > 0},
	); err != nil {
		return err
	}
	if c.IdempotencyLease > c.IdempotencyTTL {
		return fmt.Errorf("RUSHGATE_IDEMPOTENCY_LEASE: %v is longer than RUSHGATE_IDEMPOTENCY_TTL %v", c.IdempotencyLease, c.IdempotencyTTL)
	}
	return nil
}

// Validate checks the commerce settings.
func (c CommerceConfig) Validate() error {
	if c.ChargeMax > commerce.MaxAmount {
		return fmt.Errorf("RUSHGATE_CHARGE_MAX: %d is above the largest amount rushgate holds, %d", c.ChargeMax, commerce.MaxAmount)
	}
	return allPositive(
		positive{"RUSHGATE_CHARGE_MAX", c.ChargeMax > 0},
		positive{"RUSHGATE_COUPON_ISSUE_RETRIES", c.CouponIssueRetries > 0},
		positive{"RUSHGATE_TOP_PRODUCTS_FRESH_FOR", c.TopProductsFreshFor > 0},
		positive{"RUSHGATE_TOP_PRODUCTS_TIMEOUT", c.TopProductsTimeout > 0},
	)
}

// Validate checks the outbox settings.
func (c OutboxConfig) Validate() error {
	for _, u := range []struct{ name, value string }{
		{"RUSHGATE_DATAPLATFORM_URL", c.DataPlatformURL}, {"RUSHGATE_ALERT_WEBHOOK_URL", c.AlertWebhookURL},
	} {
		if u.value == "" {
			continue
		}
		if parsed, err := url.Parse(u.value); err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
			return fmt.Errorf("%s: %q is not an http(s) URL", u.name, u.value)
		}
	}
	if len(c.Backoff) == 0 {
		return errors.New("RUSHGATE_OUTBOX_BACKOFF: must list at least one wait")
	}
	for _, d := range c.Backoff {
		if d <= 0 {
			return fmt.Errorf("RUSHGATE_OUTBOX_BACKOFF: %v is not a positive wait", d)
		}
	}
	return allPositive(
		positive{"RUSHGATE_DATAPLATFORM_TIMEOUT", c.DataPlatformTimeout > 0},
		positive{"RUSHGATE_OUTBOX_INTERVAL", c.Interval > 0},
	)
}

// Validate checks the storage settings.
func (c StorageConfig) Validate() error {
	if c.S3Bucket == "" {
		if c.S3Endpoint != "" || c.S3AccessKey != "" || c.S3SecretKey != "" {
			return errors.New("RUSHGATE_S3_BUCKET: must be set with the other RUSHGATE_S3_* settings")
		}
	} else if c.S3AccessKey == "" || c.S3SecretKey == "" {
		return errors.New("RUSHGATE_S3_ACCESS_KEY: RUSHGATE_S3_ACCESS_KEY and RUSHGATE_S3_SECRET_KEY are required with RUSHGATE_S3_BUCKET")
	}
	if c.S3Endpoint != "" {
		if u, err := url.Parse(c.S3Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("RUSHGATE_S3_ENDPOINT: %q is not an http(s) URL", c.S3Endpoint)
		}
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("RUSHGATE_PUBLIC_URL: %q is not an http(s) URL", c.PublicURL)
		}
	}
	return allPositive(positive{"RUSHGATE_S3_TIMEOUT", c.S3Timeout > 0})
}

// Validate checks the upload settings.
func (c UploadConfig) Validate() error {
	return allPositive(
		positive{"RUSHGATE_UPLOAD_MAX_BYTES", c.MaxBytes > 0},
		positive{"RUSHGATE_UPLOAD_URL_EXPIRY", c.URLExpiry >= time.Second},
		positive{"RUSHGATE_UPLOAD_SESSION_EXPIRY", c.SessionExpiry > 0},
		positive{"RUSHGATE_EXPIRY_INTERVAL", c.ExpiryInterval > 0},
	)
}

// Validate checks the waiting-room settings.
func (c QueueConfig) Validate() error {
	if c.Role != RoleAll && c.Role != RoleBroker && c.Role != RoleDispatcher {
		return fmt.Errorf("RUSHGATE_ROLE: %q is not all, broker or dispatcher", c.Role)
	}
	if c.ReconnectGrace < 0 {
		return fmt.Errorf("RUSHGATE_RECONNECT_GRACE: must not be negative")
	}
	if err := allPositive(
		positive{"RUSHGATE_QUEUE_TICK", c.Tick > 0},
		positive{"RUSHGATE_QUEUE_IDLE_TIMEOUT", c.IdleTimeout > 0},
		positive{"RUSHGATE_QUEUE_POLL_INTERVAL", c.PollInterval > 0},
		positive{"RUSHGATE_BROKER_HEARTBEAT_TIMEOUT", c.BrokerHeartbeatTimeout > 0},
		positive{"RUSHGATE_SSE_HEARTBEAT", c.SSEHeartbeat > 0},
		positive{"RUSHGATE_PROMOTION_WORKERS", c.PromotionWorkers > 0},
	); err != nil {
		return err
	}
	if c.PollInterval >= c.IdleTimeout {
		return fmt.Errorf("RUSHGATE_QUEUE_POLL_INTERVAL: %v is not shorter than RUSHGATE_QUEUE_IDLE_TIMEOUT %v", c.PollInterval, c.IdleTimeout)
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
