package httppost_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/rushgate/rushgate/adapters/httppost"
)

// TestJSON_CarriesTheSpanOfItsContextAsTraceparent: a POST made inside a span names it in a W3C
// traceparent header, so the receiver's trace continues it; outside any span there is none.
func TestJSON_CarriesTheSpanOfItsContextAsTraceparent(t *testing.T) {
	var parents []string
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		parents = append(parents, r.Header.Get("traceparent"))
	}))
	defer srv.Close()
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})

	require.NoError(t, httppost.JSON(trace.ContextWithSpanContext(context.Background(), sc), srv.Client(), srv.URL, []byte(`{}`), nil))
	require.NoError(t, httppost.JSON(context.Background(), srv.Client(), srv.URL, []byte(`{}`), nil))

	assert.Equal(t, []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""}, parents)
}
