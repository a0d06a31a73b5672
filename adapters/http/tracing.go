package http

import (
	stdhttp "net/http"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/rushgate/rushgate/adapters/telemetry"
)

// untracedPaths are polled by probes and scrapers, not users: a trace each would bury theirs.
var untracedPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// traceRequests starts each request's server span in tp, named by its method and route template
// ("POST /api/orders/:orderId/payment"), continuing the caller's W3C traceparent when it sends
// one. The request's context carries the span, so the use case's spans nest under it. The
// attributes are worked out only for a span the sampler keeps: a request left out costs the
// span's start and end alone.
func traceRequests(tp trace.TracerProvider) gin.HandlerFunc {
	tracer := tp.Tracer(telemetry.ScopeName + "/adapters/http")
	return func(c *gin.Context) {
		route := c.FullPath()
		if untracedPaths[route] {
			c.Next()
			return
		}
		name := c.Request.Method
		if route != "" {
			name += " " + route
		}
		ctx := telemetry.Propagator.Extract(c.Request.Context(), propagation.HeaderCarrier(c.Request.Header))
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		if span.IsRecording() {
			span.SetAttributes(semconv.HTTPRequestMethodKey.String(c.Request.Method), semconv.HTTPRoute(route),
				semconv.URLPath(c.Request.URL.Path), semconv.ClientAddress(c.ClientIP()))
		}
		c.Request = c.Request.WithContext(ctx)
		c.Next()
		if span.IsRecording() {
			status := c.Writer.Status()
			span.SetAttributes(semconv.HTTPResponseStatusCode(status))
			if status >= stdhttp.StatusInternalServerError {
				span.SetStatus(codes.Error, stdhttp.StatusText(status))
			}
		}
	}
}
