package http

import (
	"fmt"
	"log/slog"
	"maps"
	stdhttp "net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/rushgate/rushgate/adapters/telemetry"
	"github.com/rushgate/rushgate/domain"
)

// RequestIDHeader carries the request id in both directions.
const RequestIDHeader = "X-Request-ID"

const (
	loggerKey          = "rushgate.logger"
	requestIDKey       = "rushgate.requestId"
	errorCodeKey       = "rushgate.errorCode"
	maxRequestIDLength = 128
	unmatchedRoute     = "unmatched"
)

// requestID adopts a sane incoming X-Request-ID or generates one, echoes it in the response and
// stores it with the logger; requestLogger stamps it on every line logged for the request.
func requestID(logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.GetHeader(RequestIDHeader)
		if !saneRequestID(id) {
			id = uuid.NewString()
		}
		c.Header(RequestIDHeader, id)
		c.Set(loggerKey, logger)
		c.Set(requestIDKey, id)
		c.Next()
	}
}

// saneRequestID accepts 1..128 characters of [A-Za-z0-9._:-], enough for UUIDs and tracing ids
// and nothing that could forge log lines or headers.
func saneRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// requestLogger is the logger requestID stored, stamping the request id. It is built when a
// line is to be written, not for every request: most requests log nothing at the usual levels.
func requestLogger(c *gin.Context) *slog.Logger {
	logger, ok := c.Value(loggerKey).(*slog.Logger)
	if !ok {
		return slog.Default()
	}
	return logger.With(slog.String("requestId", c.GetString(requestIDKey)))
}

// observe records each request's latency and writes its structured access-log line, as access
// says.
func observe(metrics *telemetry.Metrics, access AccessLog) gin.HandlerFunc {
	var answered atomic.Uint64 // requests below 400, for sampling
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		latency := time.Since(start)

		route := c.FullPath()
		if route == "" {
			route = unmatchedRoute
		}
		method := metricMethod(c.Request.Method)
		status := c.Writer.Status()
		metrics.ObserveRequest(method, route, status, latency)
		if logger, ok := c.Value(loggerKey).(*slog.Logger); !ok || !logger.Enabled(c.Request.Context(), access.Level) {
			return
		}
		if status < stdhttp.StatusBadRequest && access.SampleEvery > 1 && answered.Add(1)%uint64(access.SampleEvery) != 0 {
			return
		}

		attrs := []slog.Attr{
			slog.String("method", method),
			slog.String("route", route),
			slog.String("path", c.Request.URL.Path),
			slog.Int("status", status),
			slog.Float64("latencyMs", float64(latency.Microseconds())/1000),
			slog.Int("bytes", c.Writer.Size()),
			slog.String("clientIp", c.ClientIP()),
		}
		if p := principal(c); p.UserID != "" {
			attrs = append(attrs, slog.String("userId", p.UserID))
		}
		// The code says why a request was refused, which the status alone does not.
		if code := c.GetString(errorCodeKey); code != "" {
			attrs = append(attrs, slog.String("errorCode", code))
		}
		requestLogger(c).LogAttrs(c.Request.Context(), access.Level, "http request", attrs...)
	}
}

// metricMethod folds non-standard methods into one label value so clients cannot grow the
// label set.
func metricMethod(method string) string {
	switch method {
	case stdhttp.MethodGet, stdhttp.MethodHead, stdhttp.MethodPost, stdhttp.MethodPut, stdhttp.MethodPatch,
		stdhttp.MethodDelete, stdhttp.MethodOptions:
		return method
	default:
		return "OTHER"
	}
}

// recovery turns a panic into a logged 500 INTERNAL JSON answer without internals.
func recovery() gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			recovered := recover()
			if recovered == nil {
				return
			}
			requestLogger(c).LogAttrs(c.Request.Context(), slog.LevelError, "panic while handling request",
				slog.String("panic", fmt.Sprint(recovered)), slog.String("stack", string(debug.Stack())))
			if c.Writer.Written() {
				// Too late for an error body; the client sees a truncated response.
				c.Abort()
				return
			}
			writeError(c, stdhttp.StatusInternalServerError, errInternal)
		}()
		c.Next()
	}
}

// validateQuery refuses a query string that does not parse, such as a bad %-escape or a
// semicolon separator: net/http passes it on, and reading it would silently drop the broken
// pair, so "?limit=%zz" would be served with the default limit. It refuses a parameter the
// route does not take (params; a page ignores it), which would be ignored: "?limt=5", a typo,
// would be served with the default limit. And it refuses a parameter given more than once, which
// reading would answer with its first value and ignore the others ("?limit=5&limit=50"); no
// route takes a list in its query. A path no route serves takes any name: its answer is 404 or
// 405.
func validateQuery(params QueryParameters) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.URL.RawQuery == "" { // most requests: nothing to parse or look up
			c.Next()
			return
		}
		query, err := url.ParseQuery(c.Request.URL.RawQuery)
		if err != nil {
			respondError(c, domain.Invalid("query", "is not a valid query string"))
			return
		}
		route := c.FullPath() // "" when no route serves the path with this method
		rule := params[c.Request.Method+" "+route]
		// Sorted, so a query with several faults is always answered about the same one.
		for _, name := range slices.Sorted(maps.Keys(query)) {
			switch {
			case route != "" && !slices.Contains(rule.names, name):
				if rule.page {
					continue
				}
				respondError(c, notAParameter(name, rule.names))
				return
			case len(query[name]) > 1:
				respondError(c, domain.Invalid(name, "is given more than once"))
				return
			}
		}
		c.Next()
	}
}

// limitBody caps every request body at maxBytes; reading past it fails with
// *stdhttp.MaxBytesError, which decoding answers as 413. A request without a body keeps
// net/http's NoBody, which decoding then does not read.
func limitBody(maxBytes int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.Body != nil && c.Request.Body != stdhttp.NoBody {
			c.Request.Body = stdhttp.MaxBytesReader(c.Writer, c.Request.Body, maxBytes)
		}
		c.Next()
	}
}
