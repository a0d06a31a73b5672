package bootstrap

import (
	"context"
	"crypto/rand"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/telemetry"
	"github.com/rushgate/rushgate/application/waiting"
	"github.com/rushgate/rushgate/ports"
)

// PushModule runs the push mode's roles (RUSHGATE_ROLE): the broker holding this instance's SSE
// connections, and the dispatcher promoting and routing; both by default.
var PushModule = fx.Module("push",
	fx.Provide(providePushMetrics, providePushConfig, provideBroker),
	fx.Invoke(runBroker, runDispatcher))

func providePushMetrics(reg *prometheus.Registry, rooms *telemetry.Metrics) *telemetry.PushMetrics {
	return telemetry.NewPushMetrics(reg, rooms)
}

func providePushConfig(cfg Config) waiting.PushConfig {
	return waiting.PushConfig{
		Tick:             cfg.Queue.Tick,
		ReconnectGrace:   cfg.Queue.ReconnectGrace,
		HeartbeatTimeout: cfg.Queue.BrokerHeartbeatTimeout,
		PromotionWorkers: cfg.Queue.PromotionWorkers,
	}
}

// processID names this process's broker or dispatcher: the instance id and a random suffix,
// so a restarted process is a new broker whose predecessor's users are reaped.
func processID(cfg Config) string { return cfg.Server.instanceID() + "-" + rand.Text()[:8] }

// provideBroker is nil when the role runs no broker.
func provideBroker(cfg Config, pc waiting.PushConfig, rooms *waiting.Service, coord ports.Coordination,
	metrics *telemetry.PushMetrics, log *slog.Logger) *waiting.Broker {
	if !cfg.Queue.runsBroker() {
		return nil
	}
	return waiting.NewBroker(rooms, coord.PushQueue, processID(cfg), pc, metrics, log)
}

func runBroker(lc fx.Lifecycle, b *waiting.Broker, log *slog.Logger) {
	if b == nil {
		return
	}
	log.Info("push broker running", "broker", b.ID())
	runUntilStop(lc, b.Run)
}

func runDispatcher(lc fx.Lifecycle, cfg Config, pc waiting.PushConfig, rooms *waiting.Service, coord ports.Coordination,
	metrics *telemetry.PushMetrics, log *slog.Logger) {
	if !cfg.Queue.runsDispatcher() {
		return
	}
	id := processID(cfg)
	log.Info("push dispatcher running", "dispatcher", id)
	runUntilStop(lc, waiting.NewDispatcher(rooms, coord.PushQueue, id, pc, metrics, log).Run)
}

// runUntilStop runs loop from start until the application stops, which waits for it.
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
