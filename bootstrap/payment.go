package bootstrap

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"time"

	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/dataplatform"
	rghttp "github.com/rushgate/rushgate/adapters/http"
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
var PaymentModule = flow("payment",
	fx.Provide(provideDataPlatform, provideNotifier, provideRelay, providePaymentService, provideRanking),
	fx.Invoke(runOutboxRelay, runOutboxSenders),
	routes(rghttp.PaymentRoutes),
)

// OutboxConfig is the delivery of paid orders to the data platform and the alerts when one
// cannot be delivered.
type OutboxConfig struct {
	// DataPlatformURL receives each paid order as a JSON POST. Unset: a platform that logs and
	// accepts.
	DataPlatformURL string `env:"RUSHGATE_DATAPLATFORM_URL"`
	// DataPlatformTimeout bounds one delivery.
	DataPlatformTimeout time.Duration `env:"RUSHGATE_DATAPLATFORM_TIMEOUT"`
	// Interval is how often the relay sends the due messages.
	Interval time.Duration `env:"RUSHGATE_OUTBOX_INTERVAL"`
	// Backoff is the waits before retries 1, 2 and 3 (comma-separated, exactly three); a
	// message failing once more is FAILED.
	Backoff []time.Duration `env:"RUSHGATE_OUTBOX_BACKOFF" envSeparator:","`
	// AlertWebhookURL receives alerts as JSON POSTs. Unset: alerts go to the log.
	AlertWebhookURL string `env:"RUSHGATE_ALERT_WEBHOOK_URL"`
}

func (c *OutboxConfig) setDefaults() {
	c.DataPlatformTimeout = relay.DefaultSendTimeout
	c.Interval = time.Minute
	c.Backoff = slices.Clone(relay.DefaultBackoff)
}

// Validate checks the outbox settings.
func (c OutboxConfig) Validate() error {
	for _, u := range []struct{ name, value string }{
		{"RUSHGATE_DATAPLATFORM_URL", c.DataPlatformURL}, {"RUSHGATE_ALERT_WEBHOOK_URL", c.AlertWebhookURL},
	} {
		if u.value == "" {
			continue
		}
		if parsed, err := url.Parse(u.value); err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
			return fmt.Errorf("%s: %q is not an http(s) URL", u.name, u.value)
		}
	}
	// The server keeps three retries; only their waits are settings.
	if len(c.Backoff) != len(relay.DefaultBackoff) {
		return fmt.Errorf("RUSHGATE_OUTBOX_BACKOFF: lists %d waits, want %d (before retries 1, 2 and 3)",
			len(c.Backoff), len(relay.DefaultBackoff))
	}
	for _, d := range c.Backoff {
		if d <= 0 {
			return fmt.Errorf("RUSHGATE_OUTBOX_BACKOFF: %v is not a positive wait", d)
		}
	}
	return allPositive(
		positive{"RUSHGATE_DATAPLATFORM_TIMEOUT", c.DataPlatformTimeout > 0},
		positive{"RUSHGATE_OUTBOX_INTERVAL", c.Interval > 0},
	)
}

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

func provideRelay(cfg Config, stores ports.CommerceStores, platform ports.DataPlatform, notifier ports.Notifier,
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

func providePaymentService(cfg Config, tx ports.TxRunner, stores ports.CommerceStores, g *guard.Guard,
	r *relay.Service, clock ports.Clock, ids ports.IDGenerator, tracing Tracing) *payment.Service {
	return payment.NewService(payment.Deps{
		Tx:          tx,
		Orders:      stores.Orders,
		Products:    stores.Products,
		Stock:       stores.Stock,
		Wallets:     stores.Wallets,
		UserCoupons: stores.UserCoupons,
		Outbox:      stores.Outbox,
		Guard:       g,
		Delivery:    r,
		Messages:    dataplatform.Encoder{},
		Clock:       clock,
		IDs:         ids,
		Tracer:      tracing.Tracer,
	}, payment.Config{MaxBatch: cfg.Guard.LockMaxBatch, Timeout: cfg.Database.Timeout})
}

func provideRanking(cfg Config, stores ports.CommerceStores, clock ports.Clock) *ranking.Service {
	return ranking.NewService(ranking.Deps{Orders: stores.Orders, Clock: clock},
		ranking.Config{FreshFor: cfg.Commerce.TopProductsFreshFor, Timeout: cfg.Commerce.TopProductsTimeout})
}

// runOutboxRelay sends the due outbox messages every RUSHGATE_OUTBOX_INTERVAL. Every instance
// runs it; the claim keeps two from sending one message at the same time.
func runOutboxRelay(lc fx.Lifecycle, cfg Config, r *relay.Service, log *slog.Logger) {
	runUntilStop(lc, every(cfg.Outbox.Interval, func(ctx context.Context) {
		if _, err := r.Relay(ctx); err != nil && ctx.Err() == nil {
			log.Warn("relaying the outbox failed; next round retries", "error", err)
		}
	}))
}

// runOutboxSenders runs the relay's immediate senders from start until the application stops.
func runOutboxSenders(lc fx.Lifecycle, r *relay.Service) {
	runUntilStop(lc, r.RunSenders)
}
