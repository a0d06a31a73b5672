package bootstrap

import (
	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/telemetry"
	"github.com/rushgate/rushgate/application/crew"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/waiting"
	"github.com/rushgate/rushgate/ports"
)

// GuardModule builds the one guard every guarded flow shares.
var GuardModule = fx.Module("guard", fx.Provide(provideGuard))

// CrewModule builds the crew use cases.
var CrewModule = fx.Module("crew", fx.Provide(provideCrewService))

// WaitingModule builds the waiting-room and seat use cases.
var WaitingModule = fx.Module("waiting", fx.Provide(provideWaitingService))

func provideGuard(cfg Config, stores ports.Stores, coord ports.Coordination, clock ports.Clock,
	sleeper ports.Sleeper, metrics *telemetry.Metrics) *guard.Guard {
	return guard.New(guard.Deps{
		Idempotency: coord.Idempotency,
		Locker:      coord.Locker,
		Clock:       clock,
		Sleeper:     sleeper,
		Tx:          stores.Tx,
		Markers:     stores.Markers,
	}, guard.Config{
		IdempotencyTTL: cfg.Guard.IdempotencyTTL,
		Lease:          cfg.Guard.IdempotencyLease,
		LockTTL:        cfg.Guard.LockTTL,
		BaseDelay:      cfg.Guard.LockBaseDelay,
		MaxRetries:     cfg.Guard.LockRetries,
	}, guard.WithObserver(metrics))
}

func provideCrewService(cfg Config, stores ports.Stores, g *guard.Guard, clock ports.Clock, ids ports.IDGenerator) *crew.Service {
	return crew.NewService(crew.Deps{
		Tx:      stores.Tx,
		Crews:   stores.Crews,
		Members: stores.CrewMembers,
		Guard:   g,
		Clock:   clock,
		IDs:     ids,
	}, crew.Config{MaxBatch: cfg.Guard.LockMaxBatch})
}

func provideWaitingService(cfg Config, stores ports.Stores, coord ports.Coordination, g *guard.Guard,
	clock ports.Clock, ids ports.IDGenerator, metrics *telemetry.Metrics) *waiting.Service {
	return waiting.NewService(waiting.Deps{
		Tx:           stores.Tx,
		Events:       stores.Events,
		Seats:        stores.Seats,
		Reservations: stores.Reservations,
		Room:         coord.WaitingRoom,
		Guard:        g,
		Clock:        clock,
		IDs:          ids,
		Observer:     metrics,
	}, waiting.Config{
		IdleTimeout:  cfg.Queue.IdleTimeout,
		PollInterval: cfg.Queue.PollInterval,
		MaxBatch:     cfg.Guard.LockMaxBatch,
	})
}
