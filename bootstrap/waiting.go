package bootstrap

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/telemetry"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/waiting"
	"github.com/rushgate/rushgate/ports"
)

// WaitingModule is the events, their seats and waiting rooms: the store set, the use cases, the
// reconciliation pass, the push mode's roles (RUSHGATE_ROLE: the broker holding this instance's
// SSE connections and the dispatcher promoting and routing; both by default) and the routes.
var WaitingModule = flow("waiting",
	fx.Provide(storesOn(memory.NewWaitingStores, gormdb.NewWaitingStores), waiting.NewAdmissionRates,
		provideWaitingService, providePushMetrics, provideBroker),
	fx.Invoke(runQueueReconciler, runBroker, runDispatcher),
	routes(rghttp.EventRoutes),
	routes(func(cfg Config, b *waiting.Broker, t *rghttp.Tokens) rghttp.Routes {
		return rghttp.PushRoutes(b, t, cfg.Queue.SSEHeartbeat)
	}),
)

// QueueConfig is the waiting room.
type QueueConfig struct {
	// Tick is how often the background pass reconciles expired tokens and idle users, repairs
	// the seat counters and measures admission rates.
	Tick time.Duration `env:"RUSHGATE_QUEUE_TICK"`
	// IdleTimeout drops a waiting user who has not polled for this long.
	IdleTimeout time.Duration `env:"RUSHGATE_QUEUE_IDLE_TIMEOUT"`
	// PollInterval is the status poll period clients are asked for (refreshIntervalSeconds);
	// shorter than IdleTimeout.
	PollInterval time.Duration `env:"RUSHGATE_QUEUE_POLL_INTERVAL"`
	// Retention is how long the coordination store keeps a room the reconciliation found empty
	// (nobody waiting, pre-queued or admitted) before forgetting it; the event's room is opened
	// again from the database when it is next used.
	Retention time.Duration `env:"RUSHGATE_QUEUE_RETENTION"`
	// Role is what this instance runs of the push mode: "all", "broker" (the SSE
	// connections) or "dispatcher" (promotion and routing). `rushgate serve --role` sets it.
	Role string `env:"RUSHGATE_ROLE"`
	// ReconnectGrace is how long a disconnected push user keeps the place or the admission;
	// 0 applies the disconnect rules at once: waiting → out of the queue, admitted → slot back.
	ReconnectGrace time.Duration `env:"RUSHGATE_RECONNECT_GRACE"`
	// BrokerHeartbeatTimeout: a broker silent this long is dead, and its users' slots come
	// back.
	BrokerHeartbeatTimeout time.Duration `env:"RUSHGATE_BROKER_HEARTBEAT_TIMEOUT"`
	// SSEHeartbeat is the period of the comment lines that keep proxies from closing an SSE
	// stream.
	SSEHeartbeat time.Duration `env:"RUSHGATE_SSE_HEARTBEAT"`
	// PromotionWorkers promote events in parallel on a dispatcher.
	PromotionWorkers int `env:"RUSHGATE_PROMOTION_WORKERS"`
}

// Roles of an instance (QueueConfig.Role).
const (
	RoleAll        = "all"
	RoleBroker     = "broker"
	RoleDispatcher = "dispatcher"
)

// runsBroker and runsDispatcher tell what the instance's role runs.
func (c QueueConfig) runsBroker() bool     { return c.Role != RoleDispatcher }
func (c QueueConfig) runsDispatcher() bool { return c.Role != RoleBroker }

func (c *QueueConfig) setDefaults() {
	c.Tick = waiting.DefaultTick
	c.IdleTimeout = waiting.DefaultIdleTimeout
	c.PollInterval = waiting.DefaultPollInterval
	c.Retention = waiting.DefaultRetention
	c.Role = RoleAll
	c.ReconnectGrace = 10 * time.Second
	c.BrokerHeartbeatTimeout = waiting.DefaultHeartbeatTimeout
	c.SSEHeartbeat = rghttp.DefaultSSEHeartbeat
	c.PromotionWorkers = waiting.DefaultPromotionWorkers
}

// Validate checks the waiting-room settings.
func (c QueueConfig) Validate() error {
	if c.Role != RoleAll && c.Role != RoleBroker && c.Role != RoleDispatcher {
		return fmt.Errorf("RUSHGATE_ROLE: %q is not all, broker or dispatcher", c.Role)
	}
	if c.ReconnectGrace < 0 {
		return fmt.Errorf("RUSHGATE_RECONNECT_GRACE: must not be negative")
	}
	if err := allPositive(
		positive{"RUSHGATE_QUEUE_TICK", c.Tick > 0},
		positive{"RUSHGATE_QUEUE_IDLE_TIMEOUT", c.IdleTimeout > 0},
		positive{"RUSHGATE_QUEUE_POLL_INTERVAL", c.PollInterval > 0},
		positive{"RUSHGATE_QUEUE_RETENTION", c.Retention > 0},
		positive{"RUSHGATE_BROKER_HEARTBEAT_TIMEOUT", c.BrokerHeartbeatTimeout > 0},
		positive{"RUSHGATE_SSE_HEARTBEAT", c.SSEHeartbeat > 0},
		positive{"RUSHGATE_PROMOTION_WORKERS", c.PromotionWorkers > 0},
	); err != nil {
		return err
	}
	if c.PollInterval >= c.IdleTimeout {
		return fmt.Errorf("RUSHGATE_QUEUE_POLL_INTERVAL: %v is not shorter than RUSHGATE_QUEUE_IDLE_TIMEOUT %v", c.PollInterval, c.IdleTimeout)
	}
	return nil
}

func provideWaitingService(cfg Config, tx ports.TxRunner, stores ports.WaitingStores, coord ports.Coordination,
	g *guard.Guard, clock ports.Clock, sleeper ports.Sleeper, ids ports.IDGenerator, rates *waiting.AdmissionRates,
	metrics *telemetry.Metrics) *waiting.Service {
	return waiting.NewService(waiting.Deps{
		Tx:           tx,
		Events:       stores.Events,
		Seats:        stores.Seats,
		Reservations: stores.Reservations,
		Room:         coord.WaitingRoom,
		Guard:        g,
		Clock:        clock,
		IDs:          ids,
		Rates:        rates,
		Observer:     metrics,
		Sleeper:      sleeper,
	}, waiting.Config{
		IdleTimeout:  cfg.Queue.IdleTimeout,
		PollInterval: cfg.Queue.PollInterval,
		Retention:    cfg.Queue.Retention,
		MaxBatch:     cfg.Guard.LockMaxBatch,
		Timeout:      cfg.Database.Timeout,
	})
}

// runQueueReconciler reconciles the waiting rooms in use every RUSHGATE_QUEUE_TICK: expired
// tokens give their slots back, idle waiting users are dropped, seat counters are repaired.
// Every instance runs it; each expiry and drop happens once in the shared store. Stopping also
// ends the service's pre-queue opening timers.
func runQueueReconciler(lc fx.Lifecycle, cfg Config, rooms *waiting.Service, log *slog.Logger) {
	lc.Append(fx.StopHook(rooms.Close))
	runUntilStop(lc, every(cfg.Queue.Tick, func(ctx context.Context) {
		if err := rooms.Reconcile(ctx); err != nil && ctx.Err() == nil {
			log.Warn("reconciling waiting rooms failed; next tick retries", "error", err)
		}
	}))
}

func providePushMetrics(reg *prometheus.Registry, rooms *telemetry.Metrics) *telemetry.PushMetrics {
	return telemetry.NewPushMetrics(reg, rooms)
}

// processID names this process's broker or dispatcher: the instance id and a random suffix,
// so a restarted process is a new broker whose predecessor's users are reaped.
func processID(cfg Config) string { return cfg.Server.instanceID() + "-" + rand.Text()[:8] }

// provideBroker is nil when the role runs no broker.
func provideBroker(cfg Config, stores ports.WaitingStores, coord ports.Coordination, rates *waiting.AdmissionRates,
	clock ports.Clock, metrics *telemetry.PushMetrics, log *slog.Logger, tracing Tracing) *waiting.Broker {
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
		Tracer:   tracing.Tracer,
	}, processID(cfg), waiting.BrokerConfig{
		Tick:             cfg.Queue.Tick,
		ReconnectGrace:   cfg.Queue.ReconnectGrace,
		HeartbeatTimeout: cfg.Queue.BrokerHeartbeatTimeout,
		Timeout:          cfg.Database.Timeout,
	})
}

func runBroker(lc fx.Lifecycle, b *waiting.Broker, log *slog.Logger) {
	if b == nil {
		return
	}
	log.Info("push broker running", "broker", b.ID())
	runUntilStop(lc, b.Run)
}

func runDispatcher(lc fx.Lifecycle, cfg Config, stores ports.WaitingStores, coord ports.Coordination, clock ports.Clock,
	metrics *telemetry.PushMetrics, log *slog.Logger, tracing Tracing) {
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
		Tracer:   tracing.Tracer,
	}, id, waiting.DispatcherConfig{
		Tick:             cfg.Queue.Tick,
		HeartbeatTimeout: cfg.Queue.BrokerHeartbeatTimeout,
		PromotionWorkers: cfg.Queue.PromotionWorkers,
		Timeout:          cfg.Database.Timeout,
	})
	runUntilStop(lc, dispatcher.Run)
}
