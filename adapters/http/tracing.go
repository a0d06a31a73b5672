package http

import (
	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/rushgate/rushgate/adapters/telemetry"
)

// untracedPaths are polled by probes and scrapers, not users: a trace each would bury theirs.
var untracedPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// traceRequests starts each request's server span in tp, named by its method and route template
// ("POST /api/orders/:orderId/payment"), continuing the caller's W3C traceparent when it sends
// one. The request's context carries the span, so the use case's spans nest under it.
func traceRequests(tp trace.TracerProvider) gin.HandlerFunc {
	return otelgin.Middleware("rushgate",
		otelgin.WithTracerProvider(tp),
		otelgin.WithPropagators(telemetry.Propagator),
		otelgin.WithMeterProvider(metricnoop.NewMeterProvider()), // metrics are Prometheus's
		otelgin.WithGinFilter(func(c *gin.Context) bool { return !untracedPaths[c.FullPath()] }))
}
