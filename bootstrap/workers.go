package bootstrap

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.uber.org/fx"

	"github.com/rushgate/rushgate/application/guard"
)

// markerPruneBatch bounds one DELETE of expired idempotency markers.
const markerPruneBatch = 1000

// WorkersModule runs the background work: today, pruning expired idempotency markers.
var WorkersModule = fx.Module("workers", fx.Invoke(runMarkerPruner))

// runMarkerPruner prunes every RUSHGATE_MARKER_PRUNE_INTERVAL until the application stops.
func runMarkerPruner(lc fx.Lifecycle, cfg Config, g *guard.Guard, log *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			wg.Go(func() {
				ticker := time.NewTicker(cfg.Guard.MarkerPruneInterval)
				defer ticker.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-ticker.C:
					}
					n, err := g.PruneMarkers(ctx, markerPruneBatch)
					if err != nil && ctx.Err() == nil {
						log.Warn("pruning idempotency markers failed; next round retries", "error", err, "deleted", n)
					}
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
