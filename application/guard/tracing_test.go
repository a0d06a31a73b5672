package guard_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/rushgate/rushgate/adapters/telemetry"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/guard/guardtest"
)

// TestLane_TheBatchSpanIsTheHeadsChildLinkedToEveryOtherRequestItServed queues three traced
// requests behind a held lock: each has its own idempotency and wait spans; the head's request
// parents the lock and batch spans, the batch links to the two other requests (never posing as
// their child) and parents the marker save.
func TestLane_TheBatchSpanIsTheHeadsChildLinkedToEveryOtherRequestItServed(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	f := newFixture(t)
	deps := f.deps()
	deps.Sleeper = guardtest.Parked{}
	g := newGuard(deps, guard.Config{}, guard.WithObserver(f.queues), guard.WithTracer(telemetry.NewTracer(tp)))
	lane := guard.NewLane(g, guard.LaneConfig{Markers: true}, (&recorder{}).serve)

	holder := f.hold(t, lockKey)
	requests := make([]trace.SpanContext, 3)
	pending := make([]<-chan outcome, 3)
	for i := range requests {
		ctx, span := tp.Tracer("test").Start(context.Background(), "request")
		requests[i] = span.SpanContext()
		pending[i] = f.enqueue(t, ctx, func(ctx context.Context) (guard.Result[answer], error) {
			defer span.End()
			return lane.Run(ctx, request(key(i)), i)
		})
	}
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range pending {
		if o := await(t, p); o.err != nil {
			t.Fatal(o.err)
		}
	}

	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	childOf := func(s sdktrace.ReadOnlySpan, parent trace.SpanContext) bool {
		return s.Parent().SpanID() == parent.SpanID() && s.SpanContext().TraceID() == parent.TraceID()
	}
	for _, phase := range []string{"guard.idempotency.begin", "guard.lane.wait", "guard.idempotency.complete"} {
		spans := byName[phase]
		if len(spans) != 3 {
			t.Fatalf("%s: %d spans, want one per request", phase, len(spans))
		}
		for i, req := range requests {
			found := false
			for _, s := range spans {
				found = found || childOf(s, req)
			}
			if !found {
				t.Errorf("%s: none is a child of request %d", phase, i)
			}
		}
	}
	for _, name := range []string{"guard.lock.acquire", "guard.batch", "guard.markers.save"} {
		if len(byName[name]) != 1 {
			t.Fatalf("%s: %d spans, want 1", name, len(byName[name]))
		}
	}
	lock, batch, save := byName["guard.lock.acquire"][0], byName["guard.batch"][0], byName["guard.markers.save"][0]
	if !childOf(lock, requests[0]) || !childOf(batch, requests[0]) {
		t.Errorf("the lock and batch spans are not children of the head's request")
	}
	if !childOf(save, batch.SpanContext()) {
		t.Errorf("the marker save is not a child of the batch")
	}
	links := batch.Links()
	names := func(l sdktrace.Link, sc trace.SpanContext) bool {
		return l.SpanContext.TraceID() == sc.TraceID() && l.SpanContext.SpanID() == sc.SpanID()
	}
	if len(links) != 2 || !names(links[0], requests[1]) || !names(links[1], requests[2]) {
		t.Errorf("batch links %+v, want the two other requests %v", links, requests[1:])
	}
	for _, a := range batch.Attributes() {
		if a.Key == "rushgate.batch.size" && a.Value.AsInt64() != 3 {
			t.Errorf("batch size %d, want 3", a.Value.AsInt64())
		}
	}
}
