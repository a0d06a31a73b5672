package bootstrap

import (
	"go.uber.org/fx"

	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/application/crew"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/ports"
)

// ApplicationModule builds the use cases on whatever ports the infrastructure provided.
var ApplicationModule = fx.Module("application",
	fx.Provide(
		provideGuard,
		crew.NewService,
	),
)

func provideGuard(cfg Config, store ports.IdempotencyStore, locker ports.Locker, sleeper ports.Sleeper, metrics *rghttp.Metrics) *guard.Guard {
	return guard.New(store, locker, sleeper, guard.Config{
		IdempotencyTTL: cfg.IdempotencyTTL,
		Lease:          cfg.IdempotencyLease,
		LockTTL:        cfg.LockTTL,
		BaseDelay:      cfg.LockBaseDelay,
		MaxRetries:     cfg.LockRetries,
	}, guard.WithObserver(metrics))
}
