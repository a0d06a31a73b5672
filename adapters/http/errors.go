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

	"github.com/rushgate/rushgate/adapters/localblob"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/challenge"
	"github.com/rushgate/rushgate/domain/commerce"
	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/coupon"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/domain/commerce/wallet"
	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/domain/outbox"
	"github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/ports"
)

// Errors the HTTP edge answers with on its own, in the same shape as domain errors.
var (
	errUnauthorized     = domain.NewError("UNAUTHORIZED", "a valid bearer token is required")
	errForbidden        = domain.NewError("FORBIDDEN", "this action is not allowed for the authenticated user")
	errRouteNotFound    = domain.NewError("NOT_FOUND", "no such route")
	errMethodNotAllowed = domain.NewError("METHOD_NOT_ALLOWED", "method not allowed on this route")
	errPayloadTooLarge  = domain.NewError("PAYLOAD_TOO_LARGE", "request body is too large")
	errUnavailable      = domain.NewError("UNAVAILABLE", "a dependency is unavailable; retry later")
	errInternal         = domain.NewError("INTERNAL", "internal server error")
	errClientClosed     = domain.NewError("CLIENT_CLOSED_REQUEST", "the client closed the request")
	errRequestTimeout   = domain.NewError("REQUEST_TIMEOUT", "the request was not received in time")
)

// errBodyTruncated marks a body that ended before its declared length: the client hung up
// mid-request, which is its failure, not the server's.
var errBodyTruncated = errors.New("the request body ended early")

// statusClientClosed records, in logs and metrics only, that the client left before the answer
// (nginx's 499); nobody is there to read it.
const statusClientClosed = 499

// statusByCode is the one table mapping error codes to HTTP statuses. A domain error whose code
// is missing here is a programming error and answers 500.
var statusByCode = map[string]int{
	domain.CodeValidationFailed: stdhttp.StatusBadRequest,
	guard.ErrKeyRequired.Code:   stdhttp.StatusBadRequest,
	crew.ErrFull.Code:           stdhttp.StatusBadRequest,
	crew.ErrNotFound.Code:       stdhttp.StatusNotFound,
	crew.ErrNotMember.Code:      stdhttp.StatusNotFound,
	crew.ErrAlreadyMember.Code:  stdhttp.StatusConflict,
	guard.ErrInProgress.Code:    stdhttp.StatusConflict,
	guard.ErrKeyReused.Code:     stdhttp.StatusUnprocessableEntity,
	guard.ErrBusy.Code:          stdhttp.StatusTooManyRequests,
	errUnauthorized.Code:        stdhttp.StatusUnauthorized,
	errForbidden.Code:           stdhttp.StatusForbidden,
	errRouteNotFound.Code:       stdhttp.StatusNotFound,
	errMethodNotAllowed.Code:    stdhttp.StatusMethodNotAllowed,
	errPayloadTooLarge.Code:     stdhttp.StatusRequestEntityTooLarge,
	errUnavailable.Code:         stdhttp.StatusServiceUnavailable,
	errInternal.Code:            stdhttp.StatusInternalServerError,
	errClientClosed.Code:        statusClientClosed,
	errRequestTimeout.Code:      stdhttp.StatusRequestTimeout,

	commerce.ErrAmountOverflow.Code:      stdhttp.StatusBadRequest,
	wallet.ErrInvalidAmount.Code:         stdhttp.StatusBadRequest,
	wallet.ErrUserNotFound.Code:          stdhttp.StatusNotFound,
	wallet.ErrUserExists.Code:            stdhttp.StatusConflict,
	coupon.ErrNotFound.Code:              stdhttp.StatusNotFound,
	coupon.ErrSoldOut.Code:               stdhttp.StatusConflict,
	coupon.ErrExpired.Code:               stdhttp.StatusConflict,
	coupon.ErrAlreadyIssued.Code:         stdhttp.StatusConflict,
	coupon.ErrIssueFailed.Code:           stdhttp.StatusConflict,
	catalog.ErrProductNotFound.Code:      stdhttp.StatusNotFound,
	catalog.CodeInsufficientStock:        stdhttp.StatusBadRequest,
	order.ErrEmptyCart.Code:              stdhttp.StatusBadRequest,
	order.ErrNotFound.Code:               stdhttp.StatusNotFound,
	coupon.ErrInvalid.Code:               stdhttp.StatusBadRequest,
	order.ErrNotPayable.Code:             stdhttp.StatusBadRequest,
	order.ErrNotCancellable.Code:         stdhttp.StatusBadRequest,
	wallet.CodeInsufficientBalance:       stdhttp.StatusBadRequest,
	catalog.CodeStockDeductionFailed:     stdhttp.StatusConflict,
	outbox.ErrNotFound.Code:              stdhttp.StatusNotFound,
	outbox.ErrNotFailed.Code:             stdhttp.StatusConflict,
	challenge.ErrNotFound.Code:           stdhttp.StatusNotFound,
	challenge.ErrUnsupportedFile.Code:    stdhttp.StatusBadRequest,
	challenge.ErrInvalidSession.Code:     stdhttp.StatusBadRequest,
	challenge.ErrSessionAlreadyUsed.Code: stdhttp.StatusConflict,
	challenge.ErrInvalidImageKey.Code:    stdhttp.StatusBadRequest,
	challenge.ErrImageNotUploaded.Code:   stdhttp.StatusBadRequest,
	challenge.ErrDeadlinePassed.Code:     stdhttp.StatusBadRequest,
	challenge.ErrAlreadyVerified.Code:    stdhttp.StatusConflict,
	localblob.ErrSignatureInvalid.Code:   stdhttp.StatusForbidden,
	localblob.ErrURLExpired.Code:         stdhttp.StatusForbidden,
	localblob.ErrAlreadyUploaded.Code:    stdhttp.StatusConflict,
	waiting.ErrEventNotFound.Code:        stdhttp.StatusNotFound,
	waiting.ErrWrongMode.Code:            stdhttp.StatusConflict,
	waiting.ErrNotInQueue.Code:           stdhttp.StatusNotFound,
	waiting.ErrNotReady.Code:             stdhttp.StatusConflict,
	waiting.ErrTokenRequired.Code:        stdhttp.StatusForbidden,
	waiting.ErrSeatNotFound.Code:         stdhttp.StatusNotFound,
	waiting.ErrSoldOut.Code:              stdhttp.StatusConflict,
	waiting.ErrSeatBeingSelected.Code:    stdhttp.StatusConflict,
	waiting.ErrSeatAlreadyReserved.Code:  stdhttp.StatusConflict,
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
// status from statusByCode, and aborts the chain. Errors that are not domain errors never reach
// the client: a dependency failure answers 503, anything else 500, and both are logged with the
// request id. A client that left is recorded as 499, not as a failure.
func respondError(c *gin.Context, err error) {
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
		if status, known := statusByCode[de.Code]; known {
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
