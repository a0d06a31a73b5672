package bootstrap

import (
	"context"
	"log/slog"
	"sync"

	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/dataplatform"
	"github.com/rushgate/rushgate/adapters/notify"
	"github.com/rushgate/rushgate/adapters/telemetry"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/payment"
	"github.com/rushgate/rushgate/application/ranking"
	"github.com/rushgate/rushgate/application/relay"
	"github.com/rushgate/rushgate/domain/outbox"
	"github.com/rushgate/rushgate/ports"
)

// PaymentModule builds payments, the outbox relay that delivers them to the data platform and
// the top products ranking, and runs the relay's rounds and its immediate senders.
var PaymentModule = fx.Module("payment",
	fx.Provide(provideDataPlatform, provideNotifier, provideRelay, providePaymentService, provideRanking),
	fx.Invoke(runOutboxRelay, runOutboxSenders),
)

func provideDataPlatform(cfg Config, log *slog.Logger) ports.DataPlatform {
	if cfg.Outbox.DataPlatformURL == "" {
		return dataplatform.Logged{Logger: log}
	}
	return dataplatform.New(cfg.Outbox.DataPlatformURL, cfg.Outbox.DataPlatformTimeout)
}

func provideNotifier(cfg Config, log *slog.Logger) ports.Notifier {
	if cfg.Outbox.AlertWebhookURL == "" {
		return notify.Log{Logger: log}
	}
	return notify.NewWebhook(cfg.Outbox.AlertWebhookURL, cfg.Outbox.DataPlatformTimeout)
}

func provideRelay(cfg Config, stores ports.Stores, platform ports.DataPlatform, notifier ports.Notifier,
	clock ports.Clock, ids ports.IDGenerator, metrics *telemetry.Metrics, log *slog.Logger, tracing Tracing) *relay.Service {
	return relay.NewService(relay.Deps{
		Outbox:   stores.Outbox,
		Platform: platform,
		Notifier: notifier,
		Clock:    clock,
		IDs:      ids,
		Observer: metrics,
		Logger:   log,
		Tracer:   tracing.Tracer,
	}, relay.Config{Backoff: outbox.Schedule(cfg.Outbox.Backoff), SendTimeout: cfg.Outbox.DataPlatformTimeout})
}

func providePaymentService(cfg Config, stores ports.Stores, g *guard.Guard, r *relay.Service, clock ports.Clock,
	ids ports.IDGenerator, tracing Tracing) *payment.Service {
	return payment.NewService(payment.Deps{
		Tx:          stores.Tx,
		Orders:      stores.Orders,
		Products:    stores.Products,
		Stock:       stores.Stock,
		Wallets:     stores.Wallets,
		UserCoupons: stores.UserCoupons,
		Outbox:      stores.Outbox,
		Guard:       g,
		Delivery:    r,
		Clock:       clock,
		IDs:         ids,
		Tracer:      tracing.Tracer,
	}, payment.Config{MaxBatch: cfg.Guard.LockMaxBatch})
}

func provideRanking(cfg Config, stores ports.Stores, clock ports.Clock, log *slog.Logger) *ranking.Service {
	return ranking.NewService(ranking.Deps{Orders: stores.Orders, Clock: clock, Logger: log},
		ranking.Config{FreshFor: cfg.Commerce.TopProductsFreshFor, Timeout: cfg.Commerce.TopProductsTimeout})
}

// runOutboxRelay sends the due outbox messages every RUSHGATE_OUTBOX_INTERVAL. Every instance
// runs it; the claim keeps two from sending one message at the same time.
func runOutboxRelay(lc fx.Lifecycle, cfg Config, r *relay.Service, log *slog.Logger) {
	every(lc, cfg.Outbox.Interval, func(ctx context.Context) {
		if _, err := r.Relay(ctx); err != nil && ctx.Err() == nil {
			log.Warn("relaying the outbox failed; next round retries", "error", err)
		}
	})
}

// runOutboxSenders runs the relay's immediate senders from start until the application stops.
func runOutboxSenders(lc fx.Lifecycle, r *relay.Service) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			wg.Go(func() { r.RunSenders(ctx) })
			return nil
		},
		OnStop: func(context.Context) error {
			cancel()
			wg.Wait()
			return nil
		},
	})
}
