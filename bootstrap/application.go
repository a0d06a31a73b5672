package bootstrap

import (
	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/telemetry"
	"github.com/rushgate/rushgate/application/catalog"
	"github.com/rushgate/rushgate/application/coupon"
	"github.com/rushgate/rushgate/application/crew"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/order"
	"github.com/rushgate/rushgate/application/waiting"
	"github.com/rushgate/rushgate/application/wallet"
	"github.com/rushgate/rushgate/ports"
)

// GuardModule builds the one guard every guarded flow shares.
var GuardModule = fx.Module("guard", fx.Provide(provideGuard))

// CrewModule builds the crew use cases.
var CrewModule = fx.Module("crew", fx.Provide(provideCrewService))

// CommerceModule builds the points, coupon, product, cart and order use cases.
var CommerceModule = fx.Module("commerce",
	fx.Provide(provideWalletService, provideCouponService, provideCatalogService, provideOrderService))

// WaitingModule builds the waiting-room and seat use cases.
var WaitingModule = fx.Module("waiting", fx.Provide(provideWaitingService))

func provideGuard(cfg Config, stores ports.Stores, coord ports.Coordination, clock ports.Clock,
	sleeper ports.Sleeper, metrics *telemetry.Metrics, tracing Tracing) *guard.Guard {
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
	}, guard.WithObserver(metrics), guard.WithTracer(tracing.Tracer))
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

func provideWalletService(cfg Config, stores ports.Stores, g *guard.Guard, clock ports.Clock, ids ports.IDGenerator) *wallet.Service {
	return wallet.NewService(wallet.Deps{
		Tx:      stores.Tx,
		Wallets: stores.Wallets,
		Guard:   g,
		Clock:   clock,
		IDs:     ids,
	}, wallet.Config{ChargeMax: cfg.Commerce.ChargeMax, MaxBatch: cfg.Guard.LockMaxBatch})
}

func provideCouponService(cfg Config, stores ports.Stores, g *guard.Guard, clock ports.Clock, ids ports.IDGenerator) *coupon.Service {
	return coupon.NewService(coupon.Deps{
		Tx:          stores.Tx,
		Coupons:     stores.Coupons,
		UserCoupons: stores.UserCoupons,
		Guard:       g,
		Clock:       clock,
		IDs:         ids,
	}, coupon.Config{IssueRetries: cfg.Commerce.CouponIssueRetries, MaxBatch: cfg.Guard.LockMaxBatch})
}

func provideCatalogService(stores ports.Stores, clock ports.Clock, ids ports.IDGenerator) *catalog.Service {
	return catalog.NewService(catalog.Deps{Products: stores.Products, Clock: clock, IDs: ids})
}

func provideOrderService(stores ports.Stores, g *guard.Guard, clock ports.Clock, ids ports.IDGenerator) *order.Service {
	return order.NewService(order.Deps{
		Tx:          stores.Tx,
		Products:    stores.Products,
		Carts:       stores.Carts,
		Orders:      stores.Orders,
		UserCoupons: stores.UserCoupons,
		Guard:       g,
		Clock:       clock,
		IDs:         ids,
	})
}

func provideWaitingService(cfg Config, stores ports.Stores, coord ports.Coordination, g *guard.Guard,
	clock ports.Clock, ids ports.IDGenerator, metrics *telemetry.Metrics, tracing Tracing) *waiting.Service {
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
		Tracer:       tracing.Tracer,
	}, waiting.Config{
		IdleTimeout:  cfg.Queue.IdleTimeout,
		PollInterval: cfg.Queue.PollInterval,
		MaxBatch:     cfg.Guard.LockMaxBatch,
	})
}
