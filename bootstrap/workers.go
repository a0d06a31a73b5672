package bootstrap

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.uber.org/fx"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/waiting"
)

// markerPruneBatch bounds one DELETE of expired idempotency markers.
const markerPruneBatch = 1000

// WorkersModule runs the background work: pruning expired idempotency markers, expiring
// abandoned upload sessions, and the waiting rooms' reconciliation pass.
var WorkersModule = fx.Module("workers", fx.Invoke(runMarkerPruner, runSessionExpirer, runQueueReconciler))

// runMarkerPruner prunes every RUSHGATE_MARKER_PRUNE_INTERVAL until the application stops.
func runMarkerPruner(lc fx.Lifecycle, cfg Config, g *guard.Guard, log *slog.Logger) {
	every(lc, cfg.Guard.MarkerPruneInterval, func(ctx context.Context) {
		n, err := g.PruneMarkers(ctx, markerPruneBatch)
		if err != nil && ctx.Err() == nil {
			log.Warn("pruning idempotency markers failed; next round retries", "error", err, "deleted", n)
		}
	})
}

// runQueueReconciler reconciles the waiting rooms in use every RUSHGATE_QUEUE_TICK: expired
// tokens give their slots back, idle waiting users are dropped, seat counters are repaired.
// Every instance runs it; each expiry and drop happens once in the shared store.
func runQueueReconciler(lc fx.Lifecycle, cfg Config, rooms *waiting.Service, log *slog.Logger) {
	every(lc, cfg.Queue.Tick, func(ctx context.Context) {
		if err := rooms.Reconcile(ctx); err != nil && ctx.Err() == nil {
			log.Warn("reconciling waiting rooms failed; next tick retries", "error", err)
		}
	})
}

// every runs work every period from start until the application stops, which waits for the
// round in flight.
func every(lc fx.Lifecycle, period time.Duration, work func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			wg.Go(func() {
				ticker := time.NewTicker(period)
				defer ticker.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-ticker.C:
					}
					work(ctx)
				}
			})
			return nil
		},
		OnStop: func(context.Context) error {
			cancel()
			wg.Wait()
			return nil
		},
	})
}
