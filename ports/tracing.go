package ports

import "context"

// Tracer records spans: named, timed units of work that a tracing backend assembles into the
// trace of a request. The core names its phases through it (the guard's idempotency, lane,
// lock and batch; the relay's deliveries); an adapter maps them to OpenTelemetry. With tracing
// off the Tracer is NoTracer, which costs an empty call.
//
// Start begins a span named name as a child of the span ctx carries (a new trace when it
// carries none), linked to the spans links names; the returned context carries the new span.
// StartRoot begins a span that starts a trace of its own, linked to links: work that runs
// apart from the request that caused it, and serves it later. Ref names the span ctx carries,
// for a link from a later span (even in another process); it is "" when ctx carries none or
// tracing is off. An empty SpanRef among links is ignored.
type Tracer interface {
	Start(ctx context.Context, name string, links ...SpanRef) (context.Context, Span)
	StartRoot(ctx context.Context, name string, links ...SpanRef) (context.Context, Span)
	Ref(ctx context.Context) SpanRef
}

// SpanRef names one span in a form that can be stored and sent: its W3C traceparent
// ("00-<trace id>-<span id>-<flags>"); "" names none.
type SpanRef string

// Span is a started span. SetInt and SetString attach an attribute; End ends the span, marked
// failed with err when err is not nil. A span is used by one goroutine.
type Span interface {
	SetInt(key string, value int)
	SetString(key, value string)
	End(err error)
}

// NoTracer records nothing: the Tracer when tracing is off.
type NoTracer struct{}

// Start returns ctx and a span that records nothing.
func (NoTracer) Start(ctx context.Context, _ string, _ ...SpanRef) (context.Context, Span) {
	return ctx, noSpan{}
}

// StartRoot returns ctx and a span that records nothing.
func (NoTracer) StartRoot(ctx context.Context, _ string, _ ...SpanRef) (context.Context, Span) {
	return ctx, noSpan{}
}

// Ref names no span.
func (NoTracer) Ref(context.Context) SpanRef { return "" }

type noSpan struct{}

func (noSpan) SetInt(string, int)       {}
func (noSpan) SetString(string, string) {}
func (noSpan) End(error)                {}
