package bootstrap

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	stdhttp "net/http"
	"os"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/fx"

	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/adapters/telemetry"
	"github.com/rushgate/rushgate/application/waiting"
)

// Server is the running HTTP server.
type Server struct {
	listener net.Listener
}

// URL is the base URL the server answers on, e.g. http://127.0.0.1:8080.
func (s *Server) URL() string { return "http://" + s.listener.Addr().String() }

// maxHeaderBytes caps a request's header block. net/http refuses one over it with its own
// text/plain 431 before any handler runs; a bearer token and the usual headers need a few KiB.
const maxHeaderBytes = 64 << 10

// Console is where serve writes what the person who started it must read apart from the logs:
// the ready-to-paste tokens of a generated secret. HTTPModule writes to standard error; give
// fx.Replace(bootstrap.Console{Writer: w}) to fx.New to write elsewhere.
type Console struct{ io.Writer }

// HTTPModule serves the router and shuts it down gracefully.
var HTTPModule = fx.Module("http",
	fx.Provide(
		func() Console { return Console{Writer: os.Stderr} },
		provideTokens,
		provideRouter,
		provideServer,
	),
	fx.Invoke(announceTokens),
)

// generatedTokens are the ready tokens of a secret generated at start; empty when
// RUSHGATE_JWT_SECRET is set.
type generatedTokens struct {
	admin string
	users []string // user-1, user-2, …: several, so trials can race users against each other
}

// generatedUsers is how many user tokens a generated secret comes with.
const generatedUsers = 3

// provideTokens uses the configured secret, or generates one, with an admin token and a few
// user tokens, so the embedded default is usable at once.
func provideTokens(cfg Config, log *slog.Logger) (*rghttp.Tokens, generatedTokens, error) {
	if cfg.Auth.JWTSecret != "" {
		return rghttp.NewTokens([]byte(cfg.Auth.JWTSecret)), generatedTokens{}, nil
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	tokens := rghttp.NewTokens(secret)
	admin, err := tokens.Mint("admin", rghttp.RoleAdmin, 24*time.Hour)
	if err != nil {
		return nil, generatedTokens{}, err
	}
	generated := generatedTokens{admin: admin}
	for i := 1; i <= generatedUsers; i++ {
		user, err := tokens.Mint(fmt.Sprintf("user-%d", i), rghttp.RoleUser, 24*time.Hour)
		if err != nil {
			return nil, generatedTokens{}, err
		}
		generated.users = append(generated.users, user)
	}
	log.Warn("RUSHGATE_JWT_SECRET is not set: generated a secret for this process only; ready tokens are printed on the console")
	return tokens, generated, nil
}

// announceTokens prints generated tokens on the console as shell lines to paste, once the
// server listens, so they work the moment they are pasted: RUSHGATE_ADMIN_TOKEN,
// RUSHGATE_USER_TOKEN (user-1), then RUSHGATE_USER2_TOKEN (user-2) and on. They stay out of the
// logs, which are often shipped and kept.
func announceTokens(lc fx.Lifecycle, _ *Server, generated generatedTokens, console Console) {
	if generated.admin == "" {
		return
	}
	var lines strings.Builder
	lines.WriteString("# RUSHGATE_JWT_SECRET is not set: tokens for this process only, valid 24h. Paste to use them:\n")
	fmt.Fprintf(&lines, "export RUSHGATE_ADMIN_TOKEN=%s\n", generated.admin)
	for i, user := range generated.users {
		name := "RUSHGATE_USER_TOKEN"
		if i > 0 {
			name = fmt.Sprintf("RUSHGATE_USER%d_TOKEN", i+1)
		}
		fmt.Fprintf(&lines, "export %s=%s\n", name, user)
	}
	// Started after the server's own hook, which this function's dependency on *Server orders.
	lc.Append(fx.StartHook(func() { _, _ = io.WriteString(console, lines.String()) }))
}

// routes provides a flow's routes, which the router collects from every flow: constructor
// returns an rghttp.Routes.
func routes(constructor any) fx.Option {
	return fx.Provide(fx.Annotate(constructor, fx.ResultTags(`group:"routes"`)))
}

type routerParams struct {
	fx.In
	Config    Config
	Routes    []rghttp.Routes `group:"routes"`
	Tokens    *rghttp.Tokens
	Metrics   *telemetry.Metrics
	Logger    *slog.Logger
	Readiness []telemetry.ReadinessCheck `group:"readiness"`
	Tracing   Tracing
}

func provideRouter(p routerParams) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	return rghttp.NewRouter(rghttp.Deps{
		Routes:       p.Routes,
		Tokens:       p.Tokens,
		Metrics:      p.Metrics,
		Logger:       p.Logger,
		AccessLog:    accessLog(p.Config.Server),
		Readiness:    p.Readiness,
		MaxBodyBytes: p.Config.Server.MaxBodyBytes,
		Tracing:      p.Tracing.requests(),
	})
}

func provideServer(lc fx.Lifecycle, cfg Config, router *gin.Engine, listening *listenAddress, broker *waiting.Broker,
	log *slog.Logger) *Server {
	server := &Server{}
	requests, cutShort := context.WithCancelCause(context.Background())
	httpServer := &stdhttp.Server{
		BaseContext:       func(net.Listener) context.Context { return requests },
		Handler:           router,
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		ReadTimeout:       cfg.Server.ReadTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		IdleTimeout:       2 * time.Minute,
	}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			ln, err := net.Listen("tcp", cfg.Server.Addr)
			if err != nil {
				return fmt.Errorf("listen on RUSHGATE_ADDR %s: %w", cfg.Server.Addr, err)
			}
			server.listener = ln
			addr := ln.Addr()
			listening.Store(&addr)
			go func() {
				if err := httpServer.Serve(ln); err != nil && !errors.Is(err, stdhttp.ErrServerClosed) {
					log.Error("http server stopped", "error", err)
				}
			}()
			log.Info("rushgate listening", "url", server.URL(), "storage", storageName(cfg), "coordination", coordinationName(cfg))
			if cfg.Database.URL == "" || cfg.Redis.URL == "" {
				log.Warn("running on in-memory adapters: data is NOT persisted; set RUSHGATE_DATABASE_URL and RUSHGATE_REDIS_URL to use Postgres/MySQL and Redis")
			}
			return nil
		},
		OnStop: func(ctx context.Context) error {
			// In-flight requests finish (and release their locks) before this returns. Those
			// still running when the stop's time is nearly up are cancelled, so they answer 503
			// (rghttp.ErrShuttingDown) instead of losing their connection when the process exits.
			finishing, cancel := leavingAnswerTime(ctx)
			err := httpServer.Shutdown(finishing)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				cutShort(rghttp.ErrShuttingDown)
				err = httpServer.Shutdown(ctx)
			}
			if broker != nil {
				// SSE streams are taken over from net/http, whose Shutdown does not see them:
				// the broker ends them, and their users have left when this returns.
				err = errors.Join(err, broker.Close(ctx))
			}
			return err
		},
	})
	return server
}

// answerTime is how long before a stop's deadline the requests still running are cancelled,
// for them to answer and release what they hold: at most a second, half the time when less is
// left.
const answerTime = time.Second

// leavingAnswerTime is ctx ending answerTime before its deadline, if it has one.
func leavingAnswerTime(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, deadline.Add(-min(answerTime, time.Until(deadline)/2)))
}

func storageName(cfg Config) string {
	if cfg.Database.URL == "" {
		return "memory"
	}
	return strings.SplitN(cfg.Database.URL, ":", 2)[0]
}

func coordinationName(cfg Config) string {
	if cfg.Redis.URL == "" {
		return "memory"
	}
	return "redis"
}

// accessLog is the router's access-log policy from the settings Validate checked.
func accessLog(cfg ServerConfig) rghttp.AccessLog {
	level, _ := parseLevel(cfg.AccessLogLevel)
	return rghttp.AccessLog{Level: level, SampleEvery: cfg.AccessLogSample}
}
