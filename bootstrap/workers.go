package bootstrap

import (
	"context"
	"sync"
	"time"

	"go.uber.org/fx"
)

// runUntilStop runs loop from start until the application stops, which cancels loop's context
// and waits for it to return. Every background worker runs through it.
func runUntilStop(lc fx.Lifecycle, loop func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			wg.Go(func() { loop(ctx) })
			return nil
		},
		OnStop: func(context.Context) error {
			cancel()
			wg.Wait()
			return nil
		},
	})
}

// every is the loop of a worker that runs work every period until ctx ends; work's rounds do
// not overlap.
func every(period time.Duration, work func(ctx context.Context)) func(ctx context.Context) {
	return func(ctx context.Context) {
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
	}
}
