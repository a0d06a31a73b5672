// Package redis implements ports on Redis: a go-redsync Locker and an IdempotencyStore whose
// every state change is one Lua script, so concurrent instances never interleave.
//
// Every failure to reach Redis, or an answer that misses its timeout, wraps
// ports.ErrUnavailable.
package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/rushgate/rushgate/ports"
)

// Default client settings; see Options.
const (
	DefaultDialTimeout  = 500 * time.Millisecond
	DefaultReadTimeout  = 500 * time.Millisecond
	DefaultWriteTimeout = 500 * time.Millisecond
	minPoolSize         = 64
)

// Per-connection buffer sizes, well under go-redis's defaults (32 KiB for a pooled connection,
// 128 KiB for a pipeline's): rushgate's commands and replies are a few hundred bytes, a combined
// batch a few KiB, and a bigger reply only takes more reads. At the defaults a full pool held
// about 6 MiB of buffers, which an SSE broker's resident memory counts against its streams.
const (
	connBufferSize     = 4 << 10
	pipelineBufferSize = 16 << 10
)

// Options tunes the client built by NewClient. A zero field takes its default. Options, and the
// no-retry policy below, override the same settings given in the URL's query string.
type Options struct {
	// DialTimeout bounds opening one connection. Default 500ms.
	DialTimeout time.Duration
	// ReadTimeout bounds waiting for one reply, and each call as a whole: waiting for a free
	// pooled connection, dialing, sending and the reply together (blocking reads such as
	// XREADGROUP BLOCK excepted, which wait their block time on top), so a silent server costs
	// a call one timeout, never several. Default 500ms.
	ReadTimeout time.Duration
	// WriteTimeout bounds sending one command. Default 500ms.
	WriteTimeout time.Duration
	// PoolSize is the number of connections per Redis node. Default max(64, 10×GOMAXPROCS),
	// so 64 concurrent requests never queue for a connection. Half of them are kept open, so a
	// stampede on a quiet server does not wait on dozens of dials at once.
	PoolSize int
	// Tracing, when set, records every command as an OpenTelemetry span (see tracing.go).
	Tracing trace.TracerProvider
}

func (o Options) withDefaults() Options {
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.PoolSize <= 0 {
		o.PoolSize = max(minPoolSize, 10*runtime.GOMAXPROCS(0))
	}
	return o
}

// The client never retries a command itself: a retried Lua script or SET could run twice, and the
// application's guard already retries with backoff. One dial attempt, bounded by DialTimeout,
// keeps a dead server's answer within the configured timeouts instead of go-redis's five
// attempts with backoff.
const (
	noCommandRetries = -1
	dialAttempts     = 1
)

// NewClient builds a Redis client from a URL without contacting the server (call Ping for that):
//
//	redis://[user:password@]host:port[/db]            one server
//	rediss://…                                        the same over TLS
//	redis://host:port?master_name=mymaster&addr=h2:p  Sentinel: the hosts are sentinels
//	redis://host:port?addr=h2:p&addr=h3:p             Cluster: the hosts are seed nodes
//
// The query string may also carry go-redis's other URL options (client_name=…, protocol=…);
// timeouts, pool size and retries come from Options.
// The error names what is wrong and never repeats the password.
func NewClient(redisURL string, opts Options) (goredis.UniversalClient, error) {
	opts = opts.withDefaults()
	build, err := parseURL(redisURL, opts)
	if err != nil {
		return nil, err
	}
	c := bounded(build(), opts.ReadTimeout)
	if opts.Tracing != nil {
		if err := traceCommands(c, opts.Tracing); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return c, nil
}

// ParseURL checks redisURL as NewClient reads it, with the same errors, without building a
// client: a client starts dialing its warm pool at once.
func ParseURL(redisURL string) error {
	_, err := parseURL(redisURL, Options{}.withDefaults())
	return err
}

// parseURL reads redisURL and returns the function that builds its client with opts.
func parseURL(redisURL string, opts Options) (func() goredis.UniversalClient, error) {
	u, err := url.Parse(redisURL)
	if err != nil {
		// *url.Error quotes the whole URL, password included; keep only the reason.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return nil, fmt.Errorf("redis URL: not a URL: %w", err)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("redis URL: unsupported scheme %q: want redis:// or rediss://", u.Scheme)
	}
	query := u.Query()
	switch {
	case query.Has("master_name"):
		o, err := goredis.ParseFailoverURL(redisURL)
		if err != nil {
			return nil, fmt.Errorf("redis URL (sentinel): %w", err)
		}
		opts.apply(shared{&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout,
			&o.PoolSize, &o.MinIdleConns, &o.MaxRetries, &o.DialerRetries, &o.ReadBufferSize, &o.WriteBufferSize,
			&o.PipelineReadBufferSize, &o.PipelineWriteBufferSize, &o.ContextTimeoutEnabled, &o.DisableIdentity})
		return func() goredis.UniversalClient { return goredis.NewFailoverClient(o) }, nil
	case query.Has("addr"):
		o, err := goredis.ParseClusterURL(redisURL)
		if err != nil {
			return nil, fmt.Errorf("redis URL (cluster): %w", err)
		}
		opts.apply(shared{&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout,
			&o.PoolSize, &o.MinIdleConns, &o.MaxRetries, &o.DialerRetries, &o.ReadBufferSize, &o.WriteBufferSize,
			&o.PipelineReadBufferSize, &o.PipelineWriteBufferSize, &o.ContextTimeoutEnabled, &o.DisableIdentity})
		return func() goredis.UniversalClient { return goredis.NewClusterClient(o) }, nil
	default:
		o, err := goredis.ParseURL(redisURL)
		if err != nil {
			return nil, fmt.Errorf("redis URL: %w", err)
		}
		opts.apply(shared{&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout,
			&o.PoolSize, &o.MinIdleConns, &o.MaxRetries, &o.DialerRetries, &o.ReadBufferSize, &o.WriteBufferSize,
			&o.PipelineReadBufferSize, &o.PipelineWriteBufferSize, &o.ContextTimeoutEnabled, &o.DisableIdentity})
		return func() goredis.UniversalClient { return goredis.NewClient(o) }, nil
	}
}

// shared points at the settings every go-redis client type has, so one function tunes them all.
type shared struct {
	dialTimeout, readTimeout, writeTimeout, poolTimeout *time.Duration
	poolSize, minIdleConns, maxRetries, dialerRetries   *int
	readBuffer, writeBuffer                             *int
	pipelineReadBuffer, pipelineWriteBuffer             *int
	contextTimeoutEnabled, disableIdentity              *bool
}

// apply sets o's timeouts and pool, a warm half-pool, no command retries, one dial attempt and
// small buffers; a request's deadline bounds its Redis calls too. A new connection's handshake,
// which go-redis sends within the connection's first call and so within that call's timeout, is
// HELLO alone: CLIENT SETINFO, which only labels the connection in CLIENT LIST, would cost that
// call a second round trip (on a Redis answering in 150 ms, a lock attempt's 500 ms held 450 ms
// of handshake and SET).
func (o Options) apply(s shared) {
	*s.dialTimeout, *s.readTimeout, *s.writeTimeout = o.DialTimeout, o.ReadTimeout, o.WriteTimeout
	*s.poolSize, *s.poolTimeout, *s.minIdleConns = o.PoolSize, o.ReadTimeout, o.PoolSize/2
	*s.maxRetries, *s.dialerRetries = noCommandRetries, dialAttempts
	*s.readBuffer, *s.writeBuffer = connBufferSize, connBufferSize
	*s.pipelineReadBuffer, *s.pipelineWriteBuffer = pipelineBufferSize, pipelineBufferSize
	*s.contextTimeoutEnabled, *s.disableIdentity = true, true
}

// bounded caps every call c makes, but for blocking reads, at callTimeout in all.
func bounded(c goredis.UniversalClient, callTimeout time.Duration) goredis.UniversalClient {
	c.AddHook(callBound{timeout: callTimeout})
	return c
}

// callBound is a go-redis hook giving each call one deadline. go-redis bounds each step of a
// call on its own — the wait for a pooled connection, the dial of a new one, the connection's
// handshake, the reply — so with Redis frozen a call could wait several timeouts in a row, and a
// request several times its timeout.
type callBound struct{ timeout time.Duration }

// blockingCommands wait for data by design, for a block time of their own.
var blockingCommands = map[string]bool{
	"blpop": true, "brpop": true, "brpoplpush": true, "blmove": true, "blmpop": true,
	"bzpopmin": true, "bzpopmax": true, "bzmpop": true, "xread": true, "xreadgroup": true,
	"wait": true, "waitaof": true,
}

func (b callBound) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (b callBound) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if blockingCommands[cmd.Name()] {
			return next(ctx, cmd)
		}
		ctx, cancel := context.WithTimeout(ctx, b.timeout)
		defer cancel()
		return next(ctx, cmd)
	}
}

func (b callBound) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		for _, cmd := range cmds {
			if blockingCommands[cmd.Name()] {
				return next(ctx, cmds)
			}
		}
		ctx, cancel := context.WithTimeout(ctx, b.timeout)
		defer cancel()
		return next(ctx, cmds)
	}
}

// Ping checks that Redis answers. A failure wraps ports.ErrUnavailable.
func Ping(ctx context.Context, c goredis.UniversalClient) error {
	if err := c.Ping(ctx).Err(); err != nil {
		return unavailable("ping", err)
	}
	return nil
}

// unavailable wraps a client error so callers can match both ports.ErrUnavailable and the cause
// (context.DeadlineExceeded, a net.Error).
func unavailable(op string, err error) error {
	return fmt.Errorf("redis: %s: %w: %w", op, ports.ErrUnavailable, err)
}

// RouteClientLogs sends go-redis's own log lines to log at debug level: the failures it prints
// (failed dials) also come back as errors, which callers report. go-redis has one logger per
// process, so the program's composition root calls this, not an import.
func RouteClientLogs(log *slog.Logger) { goredis.SetLogger(clientLog{log: log}) }

type clientLog struct{ log *slog.Logger }

func (l clientLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}
