package bootstrap

import (
	"errors"

	"go.uber.org/dig"
	"go.uber.org/fx"
)

// Modules is the whole server for cfg; add fx.Populate or fx.Invoke options to reach into it.
func Modules(cfg Config) fx.Option {
	return fx.Options(
		fx.Supply(cfg),
		TelemetryModule,
		TracingModule,
		InfrastructureModule,
		GuardModule,
		CrewModule,
		CommerceModule,
		PaymentModule,
		VerificationModule,
		WaitingModule,
		WorkersModule,
		PushModule,
		HTTPModule,
		fx.Invoke(func(*Server) {}),
		fx.StopTimeout(cfg.Server.ShutdownTimeout),
		fx.NopLogger,
	)
}

// RootCause strips fx's wiring context from a start error so it reads as one clear line.
func RootCause(err error) error {
	if err == nil {
		return nil
	}
	if root := dig.RootCause(err); root != nil && !errors.Is(root, err) {
		return root
	}
	return err
}
