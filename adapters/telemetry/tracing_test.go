package telemetry_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/rushgate/rushgate/adapters/telemetry"
	"github.com/rushgate/rushgate/ports"
)

func recordingProvider() (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	spans := tracetest.NewSpanRecorder()
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)), spans
}

func TestTracer_RefNamesTheSpanAndLinksBackToIt(t *testing.T) {
	tp, spans := recordingProvider()
	tracer := telemetry.NewTracer(tp)
	if ref := tracer.Ref(context.Background()); ref != "" {
		t.Fatalf("Ref outside any span: %q, want none", ref)
	}
	ctx, origin := tracer.Start(context.Background(), "origin")
	ref := tracer.Ref(ctx)
	sc := trace.SpanContextFromContext(ctx)
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; string(ref) != want {
		t.Fatalf("Ref %q, want the traceparent %q", ref, want)
	}
	origin.End(nil)

	_, later := tracer.StartRoot(ctx, "later", ref, "", "not-a-traceparent")
	later.SetInt("n", 3)
	later.End(errors.New("refused"))

	ended := spans.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans ended, want 2", len(ended))
	}
	got := ended[1]
	if got.Parent().IsValid() || got.SpanContext().TraceID() == sc.TraceID() {
		t.Errorf("StartRoot's span has parent %v in trace %v: want a new trace", got.Parent(), got.SpanContext().TraceID())
	}
	if links := got.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != sc.SpanID() || links[0].SpanContext.TraceID() != sc.TraceID() {
		t.Errorf("links %+v, want only the one to the origin span (empty and malformed refs ignored)", links)
	}
	if got.Status().Code != codes.Error || len(got.Attributes()) != 1 {
		t.Errorf("status %v, attributes %v: want an error and n=3", got.Status(), got.Attributes())
	}
}

func TestWithinTraces_RecordsALibrarysSpanOnlyUnderARecordingSpan(t *testing.T) {
	tp, spans := recordingProvider()
	library := telemetry.WithinTraces(tp).Tracer("library")

	_, outside := library.Start(context.Background(), "polling")
	outside.End()
	if outside.IsRecording() || len(spans.Ended()) != 0 {
		t.Fatal("a library span outside any trace was recorded")
	}

	ctx, request := tp.Tracer("test").Start(context.Background(), "request")
	_, inside := library.Start(ctx, "statement")
	inside.End()
	request.End()
	if ended := spans.Ended(); len(ended) != 2 || ended[0].Name() != "statement" || ended[0].Parent().SpanID() != request.SpanContext().SpanID() {
		t.Fatalf("ended %v, want the statement under the request", ended)
	}

	_, afterEnd := library.Start(ctx, "late")
	afterEnd.End()
	if len(spans.Ended()) != 2 {
		t.Fatal("a library span under an ended span was recorded")
	}
}

// TestNoTracer_RecordsNothingAndAllocatesNothing: with tracing off the core's spans cost an
// empty call each, nothing on the heap.
func TestNoTracer_RecordsNothingAndAllocatesNothing(t *testing.T) {
	var tracer ports.Tracer = ports.NoTracer{}
	ctx := context.Background()
	got, span := tracer.Start(ctx, "x", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	span.End(nil)
	if got != ctx || tracer.Ref(got) != "" {
		t.Fatal("NoTracer changed the context or named a span")
	}
	allocs := testing.AllocsPerRun(100, func() {
		spanCtx, span := tracer.Start(ctx, "guard.batch")
		span.SetInt("rushgate.batch.size", 3)
		span.End(nil)
		_, root := tracer.StartRoot(spanCtx, "outbox.deliver", tracer.Ref(spanCtx))
		root.End(nil)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per untraced span, want 0", allocs)
	}
}
