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

// connBufferSize is each connection's read and write buffer, well under go-redis's default
// (32 KiB): rushgate's commands and replies are a few hundred bytes, a combined batch a few KiB,
// and a bigger reply only takes more reads. At the defaults a full pool held about 6 MiB of
// buffers, which an SSE broker's resident memory counts against its streams.
const connBufferSize = 4 << 10

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
	// PoolSize is the number of connections per Redis node, pipelines' included. Default
	// max(64, 10×GOMAXPROCS), so 64 concurrent requests never queue for a connection. WarmUp
	// opens them all; an idle connection stays open, and half the pool is kept open anyway, so
	// a stampede on a quiet server does not wait on dozens of dials at once.
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

// go-redis's values for "pipelines use the main pool" and "an idle connection stays open".
const (
	pipelinesOnTheMainPool = -1
	neverIdleOut           = -1
)

// NewClient builds a Redis client from a URL without contacting the server (call Ping for that):
//
//	redis://[user:password@]host:port[/db]            one server
//	rediss://…                                        the same over TLS
//	redis://host:port?master_name=mymaster&addr=h2:p  Sentinel: the hosts are sentinels
//	redis://host:port?addr=h2:p&addr=h3:p             Cluster: the hosts are seed nodes
//
// The query string may also carry go-redis's other URL options (client_name=…, protocol=…);
// timeouts, pool size and retries come from Options. Call WarmUp before the first call.
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
			&o.PoolSize, &o.MinIdleConns, &o.PipelinePoolSize, &o.MaxRetries, &o.DialerRetries, &o.ReadBufferSize,
			&o.WriteBufferSize, &o.ConnMaxIdleTime, &o.ContextTimeoutEnabled, &o.DisableIdentity})
		return func() goredis.UniversalClient { return goredis.NewFailoverClient(o) }, nil
	case query.Has("addr"):
		o, err := goredis.ParseClusterURL(redisURL)
		if err != nil {
			return nil, fmt.Errorf("redis URL (cluster): %w", err)
		}
		opts.apply(shared{&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout,
			&o.PoolSize, &o.MinIdleConns, &o.PipelinePoolSize, &o.MaxRetries, &o.DialerRetries, &o.ReadBufferSize,
			&o.WriteBufferSize, &o.ConnMaxIdleTime, &o.ContextTimeoutEnabled, &o.DisableIdentity})
		return func() goredis.UniversalClient { return followFailovers(goredis.NewClusterClient(o)) }, nil
	default:
		o, err := goredis.ParseURL(redisURL)
		if err != nil {
			return nil, fmt.Errorf("redis URL: %w", err)
		}
		opts.apply(shared{&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout,
			&o.PoolSize, &o.MinIdleConns, &o.PipelinePoolSize, &o.MaxRetries, &o.DialerRetries, &o.ReadBufferSize,
			&o.WriteBufferSize, &o.ConnMaxIdleTime, &o.ContextTimeoutEnabled, &o.DisableIdentity})
		return func() goredis.UniversalClient { return goredis.NewClient(o) }, nil
	}
}

// shared points at the settings every go-redis client type has, so one function tunes them all.
type shared struct {
	dialTimeout, readTimeout, writeTimeout, poolTimeout                 *time.Duration
	poolSize, minIdleConns, pipelinePoolSize, maxRetries, dialerRetries *int
	readBuffer, writeBuffer                                             *int
	connMaxIdleTime                                                     *time.Duration
	contextTimeoutEnabled, disableIdentity                              *bool
}

// apply sets o's timeouts and pool, no command retries, one dial attempt and small buffers; a
// request's deadline bounds its Redis calls too. The pool is one for commands and pipelines
// (go-redis's separate pipeline pool would open its connections in the pipelines' calls), and
// no connection closes for being idle: WarmUp opens them all, handshake included, so that calls
// find them ready. A new connection's handshake, which go-redis sends within the connection's
// first call and so within that call's timeout, is HELLO alone: CLIENT SETINFO, which only
// labels the connection in CLIENT LIST, would cost that call a second round trip (on a Redis
// answering in 150 ms, a lock attempt's 500 ms held 450 ms of handshake and SET).
func (o Options) apply(s shared) {
	*s.dialTimeout, *s.readTimeout, *s.writeTimeout = o.DialTimeout, o.ReadTimeout, o.WriteTimeout
	*s.poolSize, *s.poolTimeout, *s.minIdleConns = o.PoolSize, o.ReadTimeout, o.PoolSize/2
	*s.pipelinePoolSize, *s.connMaxIdleTime = pipelinesOnTheMainPool, neverIdleOut
	*s.maxRetries, *s.dialerRetries = noCommandRetries, dialAttempts
	*s.readBuffer, *s.writeBuffer = connBufferSize, connBufferSize
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
// request several times its timeout. WarmUp's calls, which set connections up, keep their
// context's deadline.
type callBound struct{ timeout time.Duration }

// unbounded reports a call callBound leaves alone: a blocking read, or a WarmUp call.
func unbounded(ctx context.Context, cmd goredis.Cmder) bool {
	return blockingCommands[cmd.Name()] || ctx.Value(setUpCall{}) != nil
}

// blockingCommands wait for data by design, for a block time of their own.
var blockingCommands = map[string]bool{
	"blpop": true, "brpop": true, "brpoplpush": true, "blmove": true, "blmpop": true,
	"bzpopmin": true, "bzpopmax": true, "bzmpop": true, "xread": true, "xreadgroup": true,
	"wait": true, "waitaof": true,
}

func (b callBound) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (b callBound) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if unbounded(ctx, cmd) {
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
			if unbounded(ctx, cmd) {
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
