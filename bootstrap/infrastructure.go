package bootstrap

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/ports"
)

// startTimeout bounds connecting and migrating at start.
const startTimeout = 30 * time.Second

// Storage is the transactional state: an SQL database, or memory when none is configured.
type Storage struct {
	fx.Out
	Tx        ports.TxRunner
	Crews     ports.CrewRepository
	Members   ports.CrewMemberRepository
	Readiness rghttp.ReadinessCheck `group:"readiness"`
}

// Coordination is what several instances share: Redis, or memory when none is configured.
type Coordination struct {
	fx.Out
	Locker      ports.Locker
	Idempotency ports.IdempotencyStore
	Readiness   rghttp.ReadinessCheck `group:"readiness"`
}

// InfrastructureModule picks memory or real adapters from the configuration.
var InfrastructureModule = fx.Module("infrastructure",
	fx.Provide(
		func() ports.Clock { return system.Clock{} },
		func() ports.Sleeper { return system.Sleeper{} },
		func() ports.IDGenerator { return system.UUIDs{} },
		provideStorage,
		provideCoordination,
	),
)

func provideStorage(lc fx.Lifecycle, cfg Config, log *slog.Logger) (Storage, error) {
	if cfg.DatabaseURL == "" {
		d := memory.NewDatabase()
		return Storage{
			Tx:        d,
			Crews:     memory.NewCrewRepository(d),
			Members:   memory.NewCrewMemberRepository(d),
			Readiness: rghttp.ReadinessCheck{Name: "database", Check: func(context.Context) error { return nil }},
		}, nil
	}
	// Migrations may take longer than one query; connecting is bounded by ConnectTimeout.
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	db, err := gormdb.Open(ctx, cfg.DatabaseURL, gormdb.Options{
		MaxOpenConns:   cfg.DBMaxOpenConns,
		ConnectTimeout: cfg.DBTimeout,
		TxTimeout:      cfg.DBTimeout,
	})
	if err != nil {
		return Storage{}, fmt.Errorf("database: %w", err)
	}
	if cfg.Migrate {
		if err := gormdb.Migrate(ctx, db); err != nil {
			_ = db.Close()
			return Storage{}, fmt.Errorf("database migration: %w", err)
		}
	}
	log.Info("database ready", "dialect", db.Dialect(), "migrated", cfg.Migrate)
	lc.Append(fx.StopHook(db.Close))
	return Storage{
		Tx:        gormdb.NewTxRunner(db),
		Crews:     gormdb.NewCrewRepository(db),
		Members:   gormdb.NewCrewMemberRepository(db),
		Readiness: rghttp.ReadinessCheck{Name: "database", Check: db.Ping},
	}, nil
}

func provideCoordination(lc fx.Lifecycle, cfg Config, clock ports.Clock) (Coordination, error) {
	if cfg.RedisURL == "" {
		return Coordination{
			Locker:      memory.NewLocker(clock),
			Idempotency: memory.NewIdempotencyStore(clock),
			Readiness:   rghttp.ReadinessCheck{Name: "redis", Check: func(context.Context) error { return nil }},
		}, nil
	}
	client, err := redis.NewClient(cfg.RedisURL, redis.Options{
		DialTimeout:  cfg.RedisTimeout,
		ReadTimeout:  cfg.RedisTimeout,
		WriteTimeout: cfg.RedisTimeout,
	})
	if err != nil {
		return Coordination{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.RedisTimeout)
	defer cancel()
	if err := redis.Ping(ctx, client); err != nil {
		_ = client.Close()
		return Coordination{}, err
	}
	lc.Append(fx.StopHook(client.Close))
	return Coordination{
		Locker:      redis.NewLocker(client),
		Idempotency: redis.NewIdempotencyStore(client, "rushgate:idem:"),
		Readiness: rghttp.ReadinessCheck{Name: "redis", Check: func(ctx context.Context) error {
			return redis.Ping(ctx, client)
		}},
	}, nil
}
