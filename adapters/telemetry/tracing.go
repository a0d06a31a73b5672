package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"

	"github.com/rushgate/rushgate/ports"
)

// ScopeName is the instrumentation scope of rushgate's own spans.
const ScopeName = "github.com/rushgate/rushgate"

var _ ports.Tracer = (*Tracer)(nil)

// TraceExport says where spans go: an OTLP/HTTP traces endpoint (the full URL, path
// included) and the service's name and version. The exporter reads its other settings
// (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE …) and the SDK its sampler
// (OTEL_TRACES_SAMPLER), batching (OTEL_BSP_*) and resource (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, which take precedence over Service and Version) from the
// environment.
type TraceExport struct {
	EndpointURL string
	Service     string
	Version     string
}

// NewTracerProvider returns a provider batching spans to e's endpoint over OTLP/HTTP. It
// contacts nothing until the first batch; Shutdown flushes what is pending.
func NewTracerProvider(ctx context.Context, e TraceExport) (*sdktrace.TracerProvider, error) {
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(e.EndpointURL))
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(e.Service), semconv.ServiceVersion(e.Version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res)), nil
}

// Propagator reads and writes W3C traceparent headers: the only trace context rushgate takes
// from a request and sends on.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Tracer is the ports.Tracer on an OpenTelemetry tracer provider.
type Tracer struct {
	tracer trace.Tracer
}

// NewTracer returns the Tracer recording into tp.
func NewTracer(tp trace.TracerProvider) *Tracer {
	return &Tracer{tracer: tp.Tracer(ScopeName)}
}

// Start begins a child span of ctx's span.
func (t *Tracer) Start(ctx context.Context, name string, links ...ports.SpanRef) (context.Context, ports.Span) {
	ctx, span := t.tracer.Start(ctx, name, trace.WithLinks(linksOf(links)...))
	return ctx, otelSpan{span}
}

// StartRoot begins a span that starts a new trace.
func (t *Tracer) StartRoot(ctx context.Context, name string, links ...ports.SpanRef) (context.Context, ports.Span) {
	ctx, span := t.tracer.Start(ctx, name, trace.WithNewRoot(), trace.WithLinks(linksOf(links)...))
	return ctx, otelSpan{span}
}

// Ref is ctx's span as a traceparent; "" for a span the sampler left out, which no backend
// holds to link to.
func (t *Tracer) Ref(ctx context.Context) ports.SpanRef {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	Propagator.Inject(ctx, carrier)
	return ports.SpanRef(carrier.Get("traceparent"))
}

// SpanContextOf parses a SpanRef; the result is invalid when ref is empty or malformed.
func SpanContextOf(ref ports.SpanRef) trace.SpanContext {
	if ref == "" {
		return trace.SpanContext{}
	}
	ctx := Propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": string(ref)})
	return trace.SpanContextFromContext(ctx)
}

func linksOf(refs []ports.SpanRef) []trace.Link {
	var links []trace.Link
	for _, ref := range refs {
		if sc := SpanContextOf(ref); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	return links
}

type otelSpan struct{ span trace.Span }

func (s otelSpan) SetInt(key string, value int) { s.span.SetAttributes(attribute.Int(key, value)) }

func (s otelSpan) SetString(key, value string) {
	s.span.SetAttributes(attribute.String(key, value))
}

func (s otelSpan) End(err error) {
	if err != nil {
		s.span.RecordError(err)
		s.span.SetStatus(codes.Error, err.Error())
	}
	s.span.End()
}

// WithinTraces wraps tp for a library's instrumentation (SQL statements, Redis commands) so it
// records a span only inside a span rushgate records: a request, a delivery, a promotion.
// Background polling (the reconciler, the relay's claims, heartbeats) then costs no trace per
// command, and the commands of a request the sampler left out cost no span either.
func WithinTraces(tp trace.TracerProvider) trace.TracerProvider { return withinTraces{tp: tp} }

type withinTraces struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

func (w withinTraces) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childTracer{tracer: w.tp.Tracer(name, opts...)}
}

type childTracer struct {
	embedded.Tracer
	tracer trace.Tracer
}

func (c childTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if parent := trace.SpanFromContext(ctx); !parent.IsRecording() {
		// None, unsampled or ended: its methods do nothing, so it serves as the child.
		return ctx, parent
	}
	return c.tracer.Start(ctx, name, opts...)
}
