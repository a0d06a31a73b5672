package bootstrap

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/adapters/telemetry"
	"github.com/rushgate/rushgate/ports"
)

// startTimeout bounds connecting and migrating at start.
const startTimeout = 30 * time.Second

// database is the transactional state every flow's store set is on: an SQL database, or memory
// when none is configured.
type database struct {
	sql    *gormdb.DB       // nil on memory
	memory *memory.Database // nil on SQL
}

// storage is the database, with its TxRunner and idempotency markers, which every flow shares.
type storage struct {
	fx.Out
	Database  database
	Tx        ports.TxRunner
	Markers   ports.IdempotencyMarkerRepository
	Readiness telemetry.ReadinessCheck `group:"readiness"`
}

// storesOn provides a flow's store set on the database, built by the backend's constructor.
func storesOn[S any](onMemory func(*memory.Database) S, onSQL func(*gormdb.DB) S) func(database) S {
	return func(db database) S {
		if db.sql != nil {
			return onSQL(db.sql)
		}
		return onMemory(db.memory)
	}
}

// coordination is what several instances share: Redis, or memory when none is configured.
type coordination struct {
	fx.Out
	Coordination ports.Coordination
	Readiness    telemetry.ReadinessCheck `group:"readiness"`
}

// PoolFill says whether the database's connection pool is opened whole at start, before the
// server answers (gormdb.DB.Fill), so that a sale's first burst finds its connections open.
// InfrastructureModule leaves it off: tests start many servers beside each other on one
// database. `rushgate serve` gives fx.Replace(bootstrap.PoolFill(true)) to fx.New.
type PoolFill bool

// InfrastructureModule picks memory or real adapters from the configuration.
var InfrastructureModule = fx.Module("infrastructure",
	fx.Provide(
		func() PoolFill { return false },
		func() LocalClock { return time.Now },
		provideClock,
		func() ports.Sleeper { return system.Sleeper{} },
		func() ports.IDGenerator { return system.UUIDs{} },
		provideStorage,
		provideRedis,
		provideCoordination,
	),
)

func alwaysReady(name string) telemetry.ReadinessCheck {
	return telemetry.ReadinessCheck{Name: name, Check: func(context.Context) error { return nil }}
}

func provideStorage(lc fx.Lifecycle, cfg Config, fill PoolFill, log *slog.Logger, metrics *telemetry.Metrics, tracing Tracing) (storage, error) {
	if cfg.Database.URL == "" {
		db := memory.NewDatabase()
		return storage{Database: database{memory: db}, Tx: db, Markers: memory.NewIdempotencyMarkerRepository(db),
			Readiness: alwaysReady("database")}, nil
	}
	// Migrations may take longer than one query; connecting is bounded by ConnectTimeout.
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	db, err := gormdb.Open(ctx, cfg.Database.URL, gormdb.Options{
		MaxOpenConns:    cfg.Database.MaxOpenConns,
		ConnectTimeout:  cfg.Database.Timeout,
		TxTimeout:       cfg.Database.Timeout,
		ReplicaURLs:     cfg.Database.ReplicaURLs,
		ReplicaFallback: metrics.ReplicaFellBack,
		Tracing:         tracing.libraries(),
	})
	if err != nil {
		return storage{}, fmt.Errorf("RUSHGATE_DATABASE_URL: %w", err)
	}
	if cfg.Database.Migrate {
		if err := gormdb.Migrate(ctx, db); err != nil {
			_ = db.Close()
			return storage{}, fmt.Errorf("RUSHGATE_DATABASE_URL: migration: %w", err)
		}
	}
	if fill {
		// Not fatal: the pool also opens connections on demand.
		if err := db.Fill(ctx); err != nil {
			log.Warn("database pool not filled at start", "error", err)
		}
	}
	log.Info("database ready", "dialect", db.Dialect(), "migrated", cfg.Database.Migrate, "replicas", len(cfg.Database.ReplicaURLs),
		"fillPool", bool(fill))
	lc.Append(fx.StopHook(db.Close))
	return storage{
		Database:  database{sql: db},
		Tx:        gormdb.NewTxRunner(db),
		Markers:   gormdb.NewIdempotencyMarkerRepository(db),
		Readiness: telemetry.ReadinessCheck{Name: "database", Check: db.Ping},
	}, nil
}

// warmUpRoundTrips is how many Redis timeouts the start gives redis.WarmUp: its round trips.
const warmUpRoundTrips = 5

// sharedRedis is the Redis several instances share; client is nil when none is configured.
type sharedRedis struct {
	client goredis.UniversalClient
}

// provideRedis connects to the configured Redis, if any, and watches its eviction policies.
func provideRedis(lc fx.Lifecycle, cfg Config, log *slog.Logger, metrics *telemetry.Metrics, tracing Tracing) (sharedRedis, error) {
	if cfg.Redis.URL == "" {
		return sharedRedis{}, nil
	}
	redis.RouteClientLogs(log)
	client, err := redis.NewClient(cfg.Redis.URL, redis.Options{
		DialTimeout:  cfg.Redis.Timeout,
		ReadTimeout:  cfg.Redis.Timeout,
		WriteTimeout: cfg.Redis.Timeout,
		Tracing:      tracing.libraries(),
	})
	if err != nil {
		return sharedRedis{}, fmt.Errorf("RUSHGATE_REDIS_URL: %w", err)
	}
	// Open the pool and load the scripts before any request needs them: up to five round trips,
	// each within the timeout. A warm-up that fails leaves calls to do that work themselves; the
	// ping, after it (a slow Redis answers it on a connection the warm-up opened), decides
	// whether Redis answers, and only then is the warm-up's failure worth a warning.
	warmCtx, cancelWarm := context.WithTimeout(context.Background(), warmUpRoundTrips*cfg.Redis.Timeout)
	defer cancelWarm()
	warmErr := redis.WarmUp(warmCtx, client)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Redis.Timeout)
	defer cancel()
	if err := redis.Ping(ctx, client); err != nil {
		_ = client.Close()
		return sharedRedis{}, fmt.Errorf("RUSHGATE_REDIS_URL: %w", err)
	}
	if warmErr != nil {
		log.Warn("redis warm-up incomplete: calls open connections and load scripts themselves", "error", warmErr)
	}
	policies := newEvictionPolicyWatch(client, cfg.Redis.Timeout, log, metrics)
	policies.check(context.Background())
	// Stop hooks run in reverse: whatever is built on the client (appended after this hook) stops
	// before it closes.
	lc.Append(fx.StopHook(client.Close))
	runUntilStop(lc, every(evictionPolicyInterval, policies.check))
	return sharedRedis{client: client}, nil
}

func provideCoordination(lc fx.Lifecycle, cfg Config, shared sharedRedis, clock ports.Clock) coordination {
	if shared.client == nil {
		return coordination{Coordination: memory.NewCoordination(clock), Readiness: alwaysReady("redis")}
	}
	set, closeSet := redis.NewCoordination(shared.client, cfg.Redis.KeyPrefix)
	// The locker's release subscription ends before the client closes.
	lc.Append(fx.StopHook(closeSet))
	return coordination{
		Coordination: set,
		Readiness: telemetry.ReadinessCheck{Name: "redis", Check: func(ctx context.Context) error {
			return redis.Ping(ctx, shared.client)
		}},
	}
}
