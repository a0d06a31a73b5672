package bootstrap

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/adapters/telemetry"
	"github.com/rushgate/rushgate/ports"
)

// TracingConfig is OpenTelemetry tracing, read from the standard OTEL_* variables: on when an
// OTLP endpoint is set. The exporter and the SDK read the others themselves (headers, timeout,
// compression, sampler, batching, resource; see docs/operations.md).
type TracingConfig struct {
	// Endpoint is the OTLP/HTTP base URL; traces go to its /v1/traces.
	Endpoint string `env:"OTEL_EXPORTER_OTLP_ENDPOINT"`
	// TracesEndpoint is the full URL traces go to; it takes precedence over Endpoint.
	TracesEndpoint string `env:"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"`
	// Disabled turns tracing off whatever the endpoints say.
	Disabled bool `env:"OTEL_SDK_DISABLED"`
}

// setDefaults: tracing is off unless a variable turns it on.
func (c *TracingConfig) setDefaults() {}

// tracesURL is where spans go, "" when tracing is off.
func (c TracingConfig) tracesURL() string {
	switch {
	case c.Disabled:
		return ""
	case c.TracesEndpoint != "":
		return c.TracesEndpoint
	case c.Endpoint != "":
		return strings.TrimSuffix(c.Endpoint, "/") + "/v1/traces"
	}
	return ""
}

// Validate checks the tracing settings.
func (c TracingConfig) Validate() error {
	for _, u := range []struct{ name, value string }{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", c.Endpoint}, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", c.TracesEndpoint},
	} {
		if u.value == "" {
			continue
		}
		if parsed, err := url.Parse(u.value); err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
			return fmt.Errorf("%s: %q is not an http(s) URL", u.name, u.value)
		}
	}
	return nil
}

// Tracing is what the other modules instrument with. With tracing off Provider is nil and
// nothing is instrumented: no middleware, no GORM plugin, no Redis hook, and the core's
// Tracer is ports.NoTracer.
type Tracing struct {
	Provider *sdktrace.TracerProvider
	Tracer   ports.Tracer
}

// requests is the provider of the HTTP server spans; nil when off.
func (t Tracing) requests() trace.TracerProvider {
	if t.Provider == nil {
		return nil
	}
	return t.Provider
}

// libraries is the provider of the SQL and Redis spans, recorded only inside a trace; nil when
// off.
func (t Tracing) libraries() trace.TracerProvider {
	if t.Provider == nil {
		return nil
	}
	return telemetry.WithinTraces(t.Provider)
}

// TracingModule provides Tracing from the OTEL_* settings, and flushes the spans still
// pending when the application stops.
var TracingModule = fx.Module("tracing", fx.Provide(provideTracing))

func provideTracing(lc fx.Lifecycle, cfg Config) (Tracing, error) {
	endpoint := cfg.Tracing.tracesURL()
	if endpoint == "" {
		return Tracing{Tracer: ports.NoTracer{}}, nil
	}
	tp, err := telemetry.NewTracerProvider(context.Background(), telemetry.TraceExport{
		EndpointURL: endpoint, Service: "rushgate", Version: system.ReadBuild().Version,
	})
	if err != nil {
		return Tracing{}, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %w", err)
	}
	// Started first, stopped last: the spans of everything else's shutdown are flushed too.
	lc.Append(fx.StopHook(tp.Shutdown))
	return Tracing{Provider: tp, Tracer: telemetry.NewTracer(tp)}, nil
}
