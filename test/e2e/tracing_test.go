package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/fx"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// tracedPlatform accepts every delivery and keeps the traceparent header each one carried.
type tracedPlatform struct {
	mu      sync.Mutex
	parents []string
}

func startTracedPlatform(t *testing.T) (*tracedPlatform, string) {
	p := &tracedPlatform{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.parents = append(p.parents, r.Header.Get("traceparent"))
		p.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return p, srv.URL
}

func (p *tracedPlatform) received() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.parents...)
}

// trace is the spans of one export, indexed.
type trace struct {
	spans []testenv.Span
	byID  map[string]testenv.Span
}

func indexSpans(spans []testenv.Span) trace {
	tr := trace{spans: spans, byID: map[string]testenv.Span{}}
	for _, s := range spans {
		tr.byID[s.SpanID] = s
	}
	return tr
}

// descends reports whether s is ancestor or lies below it, through parents that were received.
func (tr trace) descends(s testenv.Span, ancestor testenv.Span) bool {
	for s.ParentID != "" {
		if s.ParentID == ancestor.SpanID && s.TraceID == ancestor.TraceID {
			return true
		}
		parent, ok := tr.byID[s.ParentID]
		if !ok {
			return false
		}
		s = parent
	}
	return false
}

// below returns the spans under ancestor that match.
func (tr trace) below(ancestor testenv.Span, match func(testenv.Span) bool) []testenv.Span {
	var found []testenv.Span
	for _, s := range tr.spans {
		if match(s) && tr.descends(s, ancestor) {
			found = append(found, s)
		}
	}
	return found
}

func named(name string) func(testenv.Span) bool {
	return func(s testenv.Span) bool { return s.Name == name }
}

// TestTracing_APaymentIsOneTraceAndItsDeliveryAnotherLinkedToIt pays one order on a server
// exporting to a real OTLP/HTTP receiver: the payment's trace holds its HTTP server span (named
// by its route) and, below it, the guard's phases, and on the real backends the SQL statements
// and Redis commands; the delivery is a trace of its own linked to the payment's span, and the
// platform's POST carried the delivery span's traceparent.
func TestTracing_APaymentIsOneTraceAndItsDeliveryAnotherLinkedToIt(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			receiver := testenv.StartOTLP(t)
			platform, platformURL := startTracedPlatform(t)
			var tracing bootstrap.Tracing
			s := startServerWith(t, b, fx.Populate(&tracing), func(cfg *bootstrap.Config) {
				cfg.Tracing.Endpoint = receiver.Endpoint
				cfg.Outbox.DataPlatformURL = platformURL
			})
			if tracing.Provider == nil {
				t.Fatal("OTEL_EXPORTER_OTLP_ENDPOINT is set, yet tracing is off")
			}
			p := s.createProduct("traced", 100, 10)
			s.createUser("tracer", 10_000)
			if res := s.pay("tracer", s.placeOrder("tracer", p, 1, ""), "t1"); res.status != http.StatusOK {
				t.Fatalf("pay: %d %s", res.status, res.raw)
			}
			testkit.Eventually(t, 10*time.Second, "the delivery", func() error {
				if n := len(platform.received()); n != 1 {
					return fmt.Errorf("%d deliveries", n)
				}
				return nil
			})

			var tr trace
			var payment, deliver testenv.Span
			testkit.Eventually(t, 20*time.Second, "the payment's and the delivery's spans", func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := tracing.Provider.ForceFlush(ctx); err != nil {
					t.Logf("flush: %v", err)
				}
				tr = indexSpans(receiver.Spans())
				payment, deliver = testenv.Span{}, testenv.Span{}
				for _, span := range tr.spans {
					switch {
					case span.Server && span.Name == "POST /api/orders/:orderId/payment":
						payment = span
					case span.Name == "outbox.deliver":
						deliver = span
					}
				}
				if payment.SpanID == "" || deliver.SpanID == "" || len(tr.below(payment, named("guard.idempotency.complete"))) == 0 {
					return fmt.Errorf("%d spans, without the payment's complete one or the delivery", len(tr.spans))
				}
				return nil
			})

			if payment.ParentID != "" || payment.Attributes["http.route"] != "/api/orders/:orderId/payment" {
				t.Errorf("payment span %+v: want a root named by its route", payment)
			}
			for _, phase := range []string{"guard.idempotency.begin", "guard.lane.wait", "guard.lock.acquire",
				"guard.batch", "guard.markers.save", "guard.idempotency.complete"} {
				if len(tr.below(payment, named(phase))) != 1 {
					t.Errorf("%s: want one span below the payment's HTTP span", phase)
				}
			}
			if batch := tr.below(payment, named("guard.batch")); len(batch) == 1 && batch[0].Attributes["rushgate.batch.size"] != "1" {
				t.Errorf("batch attributes %v, want rushgate.batch.size 1", batch[0].Attributes)
			}
			if b.provision != nil {
				sql := tr.below(payment, func(s testenv.Span) bool { return s.Attributes["db.system.name"] != "" })
				if len(sql) == 0 {
					t.Error("no SQL statement span below the payment's HTTP span")
				}
				// The marker's INSERT is held back to go out with the transaction's next statement
				// or its commit, so it shows below the batch rather than below the save.
				if batch := tr.below(payment, named("guard.batch")); len(batch) == 1 &&
					len(tr.below(batch[0], func(s testenv.Span) bool {
						return strings.Contains(s.Attributes["db.query.text"], "INSERT INTO idempotency_markers")
					})) == 0 {
					t.Error("the marker's INSERT has no statement span below the batch")
				}
				if len(tr.below(payment, isRedis)) == 0 {
					t.Error("no Redis command span below the payment's HTTP span")
				}
			}

			if deliver.ParentID != "" || deliver.TraceID == payment.TraceID {
				t.Errorf("delivery span %+v: want the root of a trace of its own", deliver)
			}
			if len(deliver.Links) != 1 || deliver.Links[0] != (testenv.Link{TraceID: payment.TraceID, SpanID: payment.SpanID}) {
				t.Errorf("delivery links %+v, want one to the payment's span %s/%s", deliver.Links, payment.TraceID, payment.SpanID)
			}
			if want := "00-" + deliver.TraceID + "-" + deliver.SpanID + "-01"; platform.received()[0] != want {
				t.Errorf("the platform POST carried traceparent %q, want the delivery span's %q", platform.received()[0], want)
			}
		})
	}
}

func isRedis(s testenv.Span) bool {
	return strings.Contains(s.Scope, "redisotel") && s.Attributes["db.system"] == "redis"
}

// TestTracing_OffWithoutAnEndpoint: with no OTLP endpoint set, no exporter or provider exists
// and the core reports to ports.NoTracer, so requests pay nothing for tracing.
func TestTracing_OffWithoutAnEndpoint(t *testing.T) {
	var tracing bootstrap.Tracing
	s := startServerWith(t, backend{name: "memory"}, fx.Populate(&tracing))
	if tracing.Provider != nil {
		t.Fatal("a tracer provider exists with no endpoint set")
	}
	if _, ok := tracing.Tracer.(ports.NoTracer); !ok {
		t.Fatalf("the core's tracer is %T, want ports.NoTracer", tracing.Tracer)
	}
	if res := s.do("GET", "/healthz", "", ""); res.status != http.StatusOK {
		t.Fatalf("healthz: %d", res.status)
	}
}

// TestTracing_PushPromotionsAndDeliveriesAreTracesOfTheirOwn admits one user of a push event on
// a traced server: the dispatcher's promotion that admitted them is a root span naming the event
// and how many it promoted, with its Redis commands below it on Redis, and the broker's hand-over
// to the stream is a root span of its own.
func TestTracing_PushPromotionsAndDeliveriesAreTracesOfTheirOwn(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			receiver := testenv.StartOTLP(t)
			var tracing bootstrap.Tracing
			s := startServerWith(t, b, fx.Populate(&tracing), pushConfig(0), func(cfg *bootstrap.Config) {
				cfg.Tracing.Endpoint = receiver.Endpoint
			})
			eventID := s.createEvent(`{"name":"traced push","seats":1,"slots":1,"mode":"push"}`)
			client := s.openStream(eventID, "push-"+s.run+"traced")
			defer client.close()
			testkit.Eventually(t, 5*time.Second, "the user admitted", client.isAdmitted)

			var tr trace
			var promote, deliver testenv.Span
			testkit.Eventually(t, 20*time.Second, "the promotion's and the delivery's spans", func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = tracing.Provider.ForceFlush(ctx)
				tr = indexSpans(receiver.Spans())
				for _, span := range tr.spans {
					switch {
					case span.Name == "waiting.promote" && span.Attributes["rushgate.promoted"] == "1":
						promote = span
					case span.Name == "waiting.deliver":
						deliver = span
					}
				}
				if promote.SpanID == "" || deliver.SpanID == "" {
					return fmt.Errorf("%d spans, without a promotion of one user and its delivery", len(tr.spans))
				}
				return nil
			})
			for _, root := range []testenv.Span{promote, deliver} {
				if root.ParentID != "" || root.Attributes["rushgate.event_id"] != eventID {
					t.Errorf("%s: %+v, want a root naming event %s", root.Name, root, eventID)
				}
			}
			if b.provision != nil && len(tr.below(promote, isRedis)) == 0 {
				t.Error("no Redis command span below the promotion")
			}
		})
	}
}
