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

// WorkersModule runs the background work: pruning expired idempotency markers and expiring
// abandoned upload sessions.
var WorkersModule = fx.Module("workers", fx.Invoke(runMarkerPruner, runSessionExpirer))

// runMarkerPruner prunes every RUSHGATE_MARKER_PRUNE_INTERVAL until the application stops.
func runMarkerPruner(lc fx.Lifecycle, cfg Config, g *guard.Guard, log *slog.Logger) {
	runPeriodically(lc, cfg.Guard.MarkerPruneInterval, log, "pruning idempotency markers", func(ctx context.Context) (int, error) {
		return g.PruneMarkers(ctx, markerPruneBatch)
	})
}

// runPeriodically runs round every interval from the application's start until its stop, which
// cancels a round in flight and waits for it. A failed round is logged; the next one retries.
func runPeriodically(lc fx.Lifecycle, interval time.Duration, log *slog.Logger, what string, round func(ctx context.Context) (int, error)) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			wg.Go(func() {
				ticker := time.NewTicker(interval)
				defer ticker.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-ticker.C:
					}
					n, err := round(ctx)
					if err != nil && ctx.Err() == nil {
						log.Warn(what+" failed; next round retries", "error", err, "done", n)
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
