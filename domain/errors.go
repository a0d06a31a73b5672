// Package domain holds what every module's domain shares: the typed error that carries a stable
// code from the core to the edge. It imports the standard library only.
package domain

import (
	"errors"
	"fmt"
	"time"
)

// Error is a domain or use-case error with a stable upper-snake code (CREW_FULL). Adapters map
// codes to transport statuses in one table; the core never knows about HTTP.
type Error struct {
	Code    string
	Message string
	// Details are extra fields for the client, such as the invalid field's name.
	Details map[string]any
	// RetryAfter, when set, tells the client how long to wait before retrying.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Is makes errors.Is match on the code, so a sentinel matches a copy that carries details.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// NewError returns a sentinel-style error with a code and message.
func NewError(code, message string) *Error { return &Error{Code: code, Message: message} }

// CodeValidationFailed marks input that is malformed, missing or out of range.
const CodeValidationFailed = "VALIDATION_FAILED"

// ErrValidation matches every validation error with errors.Is.
var ErrValidation = NewError(CodeValidationFailed, "validation failed")

// Invalid returns a VALIDATION_FAILED error naming the offending field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{
		Code:    CodeValidationFailed,
		Message: field + ": " + fmt.Sprintf(format, args...),
		Details: map[string]any{"field": field},
	}
}

// AsError returns the domain error inside err, if there is one.
func AsError(err error) (*Error, bool) {
	var de *Error
	ok := errors.As(err, &de)
	return de, ok
}
