package bootstrap

import (
	"errors"

	"go.uber.org/dig"
	"go.uber.org/fx"
)

// Modules is the whole server for cfg: the shared modules and every flow's; add fx.Populate or
// fx.Invoke options to reach into it.
func Modules(cfg Config) fx.Option {
	return fx.Options(
		fx.Supply(cfg),
		TelemetryModule,
		TracingModule,
		InfrastructureModule,
		GuardModule,
		fx.Options(flowModules...),
		HTTPModule,
		fx.Invoke(func(*Server) {}),
		fx.StopTimeout(cfg.Server.ShutdownTimeout),
		fx.NopLogger,
	)
}

// flowModules are every flow's module, each added by the flow's own file through flow.
var flowModules []fx.Option

// flow declares a flow's module, which provides its store set, use cases, workers and routes,
// and adds it to the server: a new flow is its own file, and no line in Modules.
func flow(name string, options ...fx.Option) fx.Option {
	module := fx.Module(name, options...)
	flowModules = append(flowModules, module)
	return module
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
