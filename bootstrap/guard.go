package bootstrap

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/telemetry"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/ports"
)

// markerPruneBatch bounds one DELETE of expired idempotency markers.
const markerPruneBatch = 1000

// GuardModule builds the one guard every guarded flow shares, and prunes its expired
// idempotency markers.
var GuardModule = fx.Module("guard", fx.Provide(provideGuard), fx.Invoke(runMarkerPruner))

// GuardConfig is the guard of every write: distributed locks, their backoff and batching, and
// idempotency keys.
type GuardConfig struct {
	// LockTTL is a distributed lock's expiry.
	LockTTL time.Duration `env:"RUSHGATE_LOCK_TTL"`
	// LockBaseDelay is the backoff base: base × 2^attempt plus jitter.
	LockBaseDelay time.Duration `env:"RUSHGATE_LOCK_BASE_DELAY"`
	// LockRetries is how many lock attempts follow the first; 0 fails fast after one.
	LockRetries int `env:"RUSHGATE_LOCK_RETRIES"`
	// LockMaxBatch is the most requests one lock hold serves in one transaction; 1 turns
	// combining off.
	LockMaxBatch int `env:"RUSHGATE_LOCK_MAX_BATCH"`
	// IdempotencyTTL is how long a key answers retries.
	IdempotencyTTL time.Duration `env:"RUSHGATE_IDEMPOTENCY_TTL"`
	// IdempotencyLease is how long an IN_PROGRESS key blocks before a retry may take over; at
	// most IdempotencyTTL.
	IdempotencyLease time.Duration `env:"RUSHGATE_IDEMPOTENCY_LEASE"`
	// MarkerPruneInterval is how often idempotency markers older than IdempotencyTTL are
	// deleted.
	MarkerPruneInterval time.Duration `env:"RUSHGATE_MARKER_PRUNE_INTERVAL"`
}

func (c *GuardConfig) setDefaults() {
	c.LockTTL = time.Second
	c.LockBaseDelay = 100 * time.Millisecond
	c.LockRetries = 5
	c.LockMaxBatch = guard.DefaultMaxBatch
	c.IdempotencyTTL = time.Hour
	c.IdempotencyLease = 30 * time.Second
	c.MarkerPruneInterval = 10 * time.Minute
}

// Validate checks the guard settings.
func (c GuardConfig) Validate() error {
	if err := allPositive(
		positive{"RUSHGATE_LOCK_TTL", c.LockTTL > 0},
		positive{"RUSHGATE_LOCK_BASE_DELAY", c.LockBaseDelay > 0},
		positive{"RUSHGATE_LOCK_MAX_BATCH", c.LockMaxBatch > 0},
		positive{"RUSHGATE_IDEMPOTENCY_TTL", c.IdempotencyTTL > 0},
		positive{"RUSHGATE_IDEMPOTENCY_LEASE", c.IdempotencyLease > 0},
		positive{"RUSHGATE_MARKER_PRUNE_INTERVAL", c.MarkerPruneInterval > 0},
	); err != nil {
		return err
	}
	if c.LockRetries < 0 {
		return fmt.Errorf("RUSHGATE_LOCK_RETRIES: must not be negative")
	}
	if c.IdempotencyLease > c.IdempotencyTTL {
		return fmt.Errorf("RUSHGATE_IDEMPOTENCY_LEASE: %v is longer than RUSHGATE_IDEMPOTENCY_TTL %v", c.IdempotencyLease, c.IdempotencyTTL)
	}
	return nil
}

func provideGuard(cfg Config, tx ports.TxRunner, markers ports.IdempotencyMarkerRepository, coord ports.Coordination,
	clock ports.Clock, sleeper ports.Sleeper, metrics *telemetry.Metrics, tracing Tracing) *guard.Guard {
	return guard.New(guard.Deps{
		Idempotency: coord.Idempotency,
		Locker:      coord.Locker,
		Clock:       clock,
		Sleeper:     sleeper,
		Tx:          tx,
		Markers:     markers,
	}, guard.Config{
		IdempotencyTTL: cfg.Guard.IdempotencyTTL,
		Lease:          cfg.Guard.IdempotencyLease,
		LockTTL:        cfg.Guard.LockTTL,
		BaseDelay:      cfg.Guard.LockBaseDelay,
		MaxRetries:     guardRetries(cfg.Guard.LockRetries),
	}, guard.WithObserver(metrics), guard.WithTracer(tracing.Tracer))
}

// guardRetries is RUSHGATE_LOCK_RETRIES as guard.Config takes it, where zero means the default
// and a negative count means none.
func guardRetries(retries int) int {
	if retries == 0 {
		return -1
	}
	return retries
}

// runMarkerPruner prunes every RUSHGATE_MARKER_PRUNE_INTERVAL until the application stops.
func runMarkerPruner(lc fx.Lifecycle, cfg Config, g *guard.Guard, log *slog.Logger) {
	runUntilStop(lc, every(cfg.Guard.MarkerPruneInterval, func(ctx context.Context) {
		n, err := g.PruneMarkers(ctx, markerPruneBatch)
		if err != nil && ctx.Err() == nil {
			log.Warn("pruning idempotency markers failed; next round retries", "error", err, "deleted", n)
		}
	}))
}
