package bootstrap

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/application/raffle"
	"github.com/rushgate/rushgate/ports"
)

// RaffleModule is the raffles: their store set, use cases, the draw worker, the routes and the
// purchase permission commerce asks.
var RaffleModule = flow("raffle",
	fx.Provide(storesOn(memory.NewRaffleStores, gormdb.NewRaffleStores), provideRaffleService,
		func(s *raffle.Service) ports.PurchasePermissions { return s }),
	fx.Invoke(runRaffleDrawer),
	routes(rghttp.RaffleRoutes),
)

// RaffleConfig is the raffles.
type RaffleConfig struct {
	// DrawInterval is how often the draw worker looks for raffles past their closesAt.
	DrawInterval time.Duration `env:"RUSHGATE_RAFFLE_DRAW_INTERVAL"`
	// DrawHold holds each draw between ordering the entrants and writing the result: for fault
	// tests that kill an instance mid-draw. Zero, no hold, by default.
	DrawHold time.Duration `env:"RUSHGATE_RAFFLE_DRAW_HOLD"`
}

func (c *RaffleConfig) setDefaults() { c.DrawInterval = raffle.DefaultDrawInterval }

// Validate checks the raffle settings.
func (c RaffleConfig) Validate() error {
	if c.DrawHold < 0 {
		return errors.New("RUSHGATE_RAFFLE_DRAW_HOLD: must not be negative")
	}
	return allPositive(positive{"RUSHGATE_RAFFLE_DRAW_INTERVAL", c.DrawInterval > 0})
}

func provideRaffleService(cfg Config, tx ports.TxRunner, stores ports.RaffleStores, commerce ports.CommerceStores, clock ports.Clock,
	ids ports.IDGenerator) *raffle.Service {
	return raffle.NewService(raffle.Deps{Tx: tx, Raffles: stores.Raffles, Entries: stores.Entries, Products: commerce.Products,
		Clock: clock, IDs: ids,
		Timeout: cfg.Database.Timeout, DrawHold: cfg.Raffle.DrawHold})
}

// runRaffleDrawer draws raffles at their closesAt on every instance: the draw's row lock and
// conditional write let only one instance draw each.
func runRaffleDrawer(lc fx.Lifecycle, cfg Config, raffles *raffle.Service, log *slog.Logger) {
	runUntilStop(lc, every(cfg.Raffle.DrawInterval, func(ctx context.Context) {
		if _, err := raffles.DrawDue(ctx); err != nil && ctx.Err() == nil {
			log.Warn("drawing raffles failed; next round retries", "error", err)
		}
	}))
}
