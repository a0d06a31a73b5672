package bootstrap

import (
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/telemetry"
)

// TelemetryModule provides the logger and the metrics every other module records into, so a
// background worker runs without the HTTP module.
var TelemetryModule = fx.Module("telemetry", fx.Provide(provideLogger, provideMetrics))

func provideLogger(cfg Config) *slog.Logger {
	level, _ := parseLevel(cfg.Server.LogLevel) // Validate refused any other value
	return slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: level})).
		With("instance", cfg.Server.instanceID())
}

func provideMetrics() (*telemetry.Metrics, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return telemetry.NewMetrics(reg), reg
}
