package http

import (
	"context"
	"errors"
	"log/slog"
	"math"
	stdhttp "net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/ports"
)

// Errors the HTTP edge answers with on its own, in the same shape as domain errors.
var (
	errUnauthorized     = domain.NewError(domain.KindUnauthenticated, "UNAUTHORIZED", "a valid bearer token is required")
	errForbidden        = domain.NewError(domain.KindForbidden, "FORBIDDEN", "this action is not allowed for the authenticated user")
	errRouteNotFound    = domain.NewError(domain.KindNotFound, "NOT_FOUND", "no such route")
	errMethodNotAllowed = domain.NewError(domain.KindNotFound, "METHOD_NOT_ALLOWED", "method not allowed on this route")
	errPayloadTooLarge  = domain.NewError(domain.KindInvalid, "PAYLOAD_TOO_LARGE", "request body is too large")
	errUnavailable      = domain.NewError(domain.KindUnavailable, "UNAVAILABLE", "a dependency is unavailable; retry later")
	errInternal         = domain.NewError(domain.KindInternal, "INTERNAL", "internal server error")
	errClientClosed     = domain.NewError(domain.KindInvalid, "CLIENT_CLOSED_REQUEST", "the client closed the request")
	errRequestTimeout   = domain.NewError(domain.KindInvalid, "REQUEST_TIMEOUT", "the request was not received in time")
)

// errBodyTruncated marks a body that ended before its declared length: the client hung up
// mid-request, which is its failure, not the server's.
var errBodyTruncated = errors.New("the request body ended early")

// statusClientClosed records, in logs and metrics only, that the client left before the answer
// (nginx's 499); nobody is there to read it.
const statusClientClosed = 499

// statusByKind maps each kind of domain error to its HTTP status. A domain error of a kind
// missing here is a programming error and answers 500.
var statusByKind = map[domain.Kind]int{
	domain.KindInvalid:         stdhttp.StatusBadRequest,
	domain.KindNotFound:        stdhttp.StatusNotFound,
	domain.KindConflict:        stdhttp.StatusConflict,
	domain.KindUnauthenticated: stdhttp.StatusUnauthorized,
	domain.KindForbidden:       stdhttp.StatusForbidden,
	domain.KindBusy:            stdhttp.StatusTooManyRequests,
	domain.KindUnavailable:     stdhttp.StatusServiceUnavailable,
	domain.KindInternal:        stdhttp.StatusInternalServerError,
}

// statusOverrides names the codes whose status is not their kind's: HTTP has a status of its
// own for them.
var statusOverrides = map[string]int{
	guard.ErrKeyReused.Code:  stdhttp.StatusUnprocessableEntity,
	errMethodNotAllowed.Code: stdhttp.StatusMethodNotAllowed,
	errPayloadTooLarge.Code:  stdhttp.StatusRequestEntityTooLarge,
	errClientClosed.Code:     statusClientClosed,
	errRequestTimeout.Code:   stdhttp.StatusRequestTimeout,
}

// errorStatus is de's status: its code's override, else its kind's. ok is false for a kind
// statusByKind lacks.
func errorStatus(de *domain.Error) (status int, ok bool) {
	if status, ok := statusOverrides[de.Code]; ok {
		return status, true
	}
	status, ok = statusByKind[de.Kind]
	return status, ok
}

// statusByOutcome maps what a successful guarded call did to its status.
var statusByOutcome = map[guard.Outcome]int{
	guard.OutcomeCreated: stdhttp.StatusCreated,
	guard.OutcomeDone:    stdhttp.StatusOK,
}

// statusOf is the status of a successful guarded call. TestStatusByOutcome_CoversEveryOutcome
// keeps every outcome mapped.
func statusOf(outcome guard.Outcome) int {
	if status, ok := statusByOutcome[outcome]; ok {
		return status
	}
	return stdhttp.StatusOK
}

// unavailableRetryAfter is the Retry-After sent with 503 UNAVAILABLE.
const unavailableRetryAfter = time.Second

// respondError answers err as the JSON error body {"error", "message", ...details} with the
// status from errorStatus, and aborts the chain. Errors that are not domain errors never reach
// the client: a dependency failure answers 503, anything else 500, and both are logged with the
// request id. A client that left is recorded as 499, not as a failure.
func respondError(c *gin.Context, err error) {
	if shuttingDown(c) {
		requestLogger(c).LogAttrs(c.Request.Context(), slog.LevelWarn, "request cut short by the shutdown",
			slog.String("error", err.Error()))
		unavailable := *errUnavailable
		unavailable.RetryAfter = unavailableRetryAfter
		writeError(c, stdhttp.StatusServiceUnavailable, &unavailable)
		return
	}
	if clientGone(c, err) {
		requestLogger(c).LogAttrs(c.Request.Context(), slog.LevelInfo, "client closed the request",
			slog.String("error", err.Error()))
		writeError(c, statusClientClosed, errClientClosed)
		return
	}
	de, status := classify(err)
	if status >= stdhttp.StatusInternalServerError {
		requestLogger(c).LogAttrs(c.Request.Context(), slog.LevelError, "request failed",
			slog.Int("status", status), slog.String("error", err.Error()))
	}
	writeError(c, status, de)
}

// ErrShuttingDown is the cause a server cancels its requests' contexts with when its shutdown
// can wait for them no longer: they answer 503 UNAVAILABLE, which a client retries on another
// instance, instead of losing their connection when the process exits.
var ErrShuttingDown = errors.New("http: the server is shutting down")

// shuttingDown reports a request the server's shutdown cancelled, whatever error that caused.
func shuttingDown(c *gin.Context) bool {
	return errors.Is(context.Cause(c.Request.Context()), ErrShuttingDown)
}

// clientGone reports a request its client abandoned: the connection closed (cancelling the
// request's context), or the body ended before its declared length.
func clientGone(c *gin.Context, err error) bool {
	return errors.Is(err, errBodyTruncated) || errors.Is(err, context.Canceled) && c.Request.Context().Err() != nil
}

// writeError writes de with status, its Retry-After header and its details merged into the body,
// and keeps its code for the access log.
func writeError(c *gin.Context, status int, de *domain.Error) {
	c.Set(errorCodeKey, de.Code)
	if de.RetryAfter > 0 {
		c.Header("Retry-After", strconv.FormatInt(int64(math.Ceil(de.RetryAfter.Seconds())), 10))
	}
	body := make(gin.H, len(de.Details)+2)
	for k, v := range de.Details {
		body[k] = v
	}
	body["error"] = de.Code
	body["message"] = de.Message
	c.Abort()
	writeJSON(c, status, body)
}

// classify maps err to the domain error the client sees and its status.
func classify(err error) (*domain.Error, int) {
	if de, ok := domain.AsError(err); ok {
		if status, known := errorStatus(de); known {
			return de, status
		}
		return errInternal, stdhttp.StatusInternalServerError
	}
	if errors.Is(err, ports.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		unavailable := *errUnavailable
		unavailable.RetryAfter = unavailableRetryAfter
		return &unavailable, stdhttp.StatusServiceUnavailable
	}
	return errInternal, stdhttp.StatusInternalServerError
}
