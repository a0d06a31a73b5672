package testenv

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// OTLP is a real OTLP/HTTP trace receiver: it decodes each export request (protobuf, gzipped
// or not) posted to /v1/traces, answers as a collector does, and keeps the spans.
type OTLP struct {
	// Endpoint is the base URL to give as OTEL_EXPORTER_OTLP_ENDPOINT.
	Endpoint string

	mu    sync.Mutex
	spans []Span
}

// Span is a received span with its ids in hex, as a traceparent writes them.
type Span struct {
	Scope                     string // the instrumentation scope that recorded it
	TraceID, SpanID, ParentID string // ParentID is "" for a root
	Name                      string
	Server                    bool              // span kind SERVER
	Attributes                map[string]string // every value in its string form
	Links                     []Link
	Failed                    bool // status ERROR
}

// Link is a span's link to another.
type Link struct{ TraceID, SpanID string }

// StartOTLP starts a receiver for the test's lifetime.
func StartOTLP(t testing.TB) *OTLP {
	o := &OTLP{}
	srv := httptest.NewServer(http.HandlerFunc(o.serve))
	t.Cleanup(srv.Close)
	o.Endpoint = srv.URL
	return o
}

func (o *OTLP) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a protobuf POST to /v1/traces", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				span := Span{
					Scope:      ss.GetScope().GetName(),
					TraceID:    hex.EncodeToString(s.GetTraceId()),
					SpanID:     hex.EncodeToString(s.GetSpanId()),
					Name:       s.GetName(),
					Server:     s.GetKind().String() == "SPAN_KIND_SERVER",
					Attributes: attributes(s.GetAttributes()),
					Failed:     s.GetStatus().GetCode().String() == "STATUS_CODE_ERROR",
				}
				if len(s.GetParentSpanId()) > 0 {
					span.ParentID = hex.EncodeToString(s.GetParentSpanId())
				}
				for _, l := range s.GetLinks() {
					span.Links = append(span.Links, Link{TraceID: hex.EncodeToString(l.GetTraceId()), SpanID: hex.EncodeToString(l.GetSpanId())})
				}
				got = append(got, span)
			}
		}
	}
	o.mu.Lock()
	o.spans = append(o.spans, got...)
	o.mu.Unlock()
	answer, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(answer)
}

func attributes(kvs []*commonv1.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonv1.AnyValue_StringValue:
			m[kv.GetKey()] = v.StringValue
		case *commonv1.AnyValue_IntValue:
			m[kv.GetKey()] = strconv.FormatInt(v.IntValue, 10)
		case *commonv1.AnyValue_BoolValue:
			m[kv.GetKey()] = strconv.FormatBool(v.BoolValue)
		default:
			m[kv.GetKey()] = fmt.Sprint(v)
		}
	}
	return m
}

// Spans returns every span received so far.
func (o *OTLP) Spans() []Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Span(nil), o.spans...)
}
