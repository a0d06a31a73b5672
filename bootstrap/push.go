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
	fx.Provide(providePushMetrics, provideBroker),
	fx.Invoke(runBroker, runDispatcher))

func providePushMetrics(reg *prometheus.Registry, rooms *telemetry.Metrics) *telemetry.PushMetrics {
	return telemetry.NewPushMetrics(reg, rooms)
}

// processID names this process's broker or dispatcher: the instance id and a random suffix,
// so a restarted process is a new broker whose predecessor's users are reaped.
func processID(cfg Config) string { return cfg.Server.instanceID() + "-" + rand.Text()[:8] }

// provideBroker is nil when the role runs no broker.
func provideBroker(cfg Config, stores ports.Stores, coord ports.Coordination, rates *waiting.AdmissionRates,
	clock ports.Clock, metrics *telemetry.PushMetrics, log *slog.Logger) *waiting.Broker {
	if !cfg.Queue.runsBroker() {
		return nil
	}
	return waiting.NewBroker(waiting.BrokerDeps{
		Events:   stores.Events,
		Seats:    stores.Seats,
		Rooms:    coord.WaitingRoom,
		Queue:    coord.PushQueue,
		Rates:    rates,
		Clock:    clock,
		Observer: metrics,
		Log:      log,
	}, processID(cfg), waiting.BrokerConfig{
		Tick:             cfg.Queue.Tick,
		ReconnectGrace:   cfg.Queue.ReconnectGrace,
		HeartbeatTimeout: cfg.Queue.BrokerHeartbeatTimeout,
	})
}

func runBroker(lc fx.Lifecycle, b *waiting.Broker, log *slog.Logger) {
	if b == nil {
		return
	}
	log.Info("push broker running", "broker", b.ID())
	runUntilStop(lc, b.Run)
}

func runDispatcher(lc fx.Lifecycle, cfg Config, stores ports.Stores, coord ports.Coordination, clock ports.Clock,
	metrics *telemetry.PushMetrics, log *slog.Logger) {
	if !cfg.Queue.runsDispatcher() {
		return
	}
	id := processID(cfg)
	log.Info("push dispatcher running", "dispatcher", id)
	dispatcher := waiting.NewDispatcher(waiting.DispatcherDeps{
		Events:   stores.Events,
		Seats:    stores.Seats,
		Rooms:    coord.WaitingRoom,
		Index:    coord.WaitingRoom,
		Queue:    coord.PushQueue,
		Clock:    clock,
		Observer: metrics,
		Log:      log,
	}, id, waiting.DispatcherConfig{
		Tick:             cfg.Queue.Tick,
		HeartbeatTimeout: cfg.Queue.BrokerHeartbeatTimeout,
		PromotionWorkers: cfg.Queue.PromotionWorkers,
	})
	runUntilStop(lc, dispatcher.Run)
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
