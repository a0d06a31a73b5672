// Package domain holds what every module's domain shares: the typed error that carries a stable
// code from the core to the edge. It imports the standard library only.
package domain

import (
	"errors"
	"fmt"
	"maps"
	"time"
)

// Kind says what sort of failure an Error is. Adapters map kinds to transport statuses, so a new
// code needs no row of its own unless its status differs from its kind's.
type Kind string

// The kinds of failure. The set is closed: an adapter maps each one.
const (
	// KindInvalid: the request is malformed, or a rule of the domain refuses it as asked.
	KindInvalid Kind = "invalid"
	// KindNotFound: what the request names does not exist (or is not the caller's to see).
	KindNotFound Kind = "not_found"
	// KindConflict: the request collides with the current state: it exists already, ran out,
	// or is being changed by someone else.
	KindConflict Kind = "conflict"
	// KindUnauthenticated: the caller is not known.
	KindUnauthenticated Kind = "unauthenticated"
	// KindForbidden: the caller is known but may not do this.
	KindForbidden Kind = "forbidden"
	// KindBusy: too much contention right now; the same request may succeed later.
	KindBusy Kind = "busy"
	// KindUnavailable: a dependency is down or too slow.
	KindUnavailable Kind = "unavailable"
	// KindInternal: a fault of the server.
	KindInternal Kind = "internal"
)

// Error is a domain or use-case error with a kind and a stable upper-snake code (CREW_FULL).
// Adapters map kinds (and the rare code that differs from its kind) to transport statuses; the
// core never knows about HTTP.
type Error struct {
	Kind    Kind
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

// NewError returns a sentinel-style error of a kind with a code and message.
func NewError(kind Kind, code, message string) *Error {
	return &Error{Kind: kind, Code: code, Message: message}
}

// WithMessage returns a copy of e that says message instead: the same kind and code, so the copy
// still matches e with errors.Is.
func (e *Error) WithMessage(message string) *Error {
	c := *e
	c.Message = message
	return &c
}

// WithDetails returns a copy of e with details added to (or replacing) its own.
func (e *Error) WithDetails(details map[string]any) *Error {
	c := *e
	c.Details = maps.Clone(e.Details)
	if c.Details == nil {
		c.Details = make(map[string]any, len(details))
	}
	maps.Copy(c.Details, details)
	return &c
}

// CodeValidationFailed marks input that is malformed, missing or out of range.
const CodeValidationFailed = "VALIDATION_FAILED"

// ErrValidation matches every validation error with errors.Is.
var ErrValidation = NewError(KindInvalid, CodeValidationFailed, "validation failed")

// Invalid returns a VALIDATION_FAILED error naming the offending field.
func Invalid(field, format string, args ...any) *Error {
	return ErrValidation.WithMessage(field + ": " + fmt.Sprintf(format, args...)).
		WithDetails(map[string]any{"field": field})
}

// AsError returns the domain error inside err, if there is one.
func AsError(err error) (*Error, bool) {
	var de *Error
	ok := errors.As(err, &de)
	return de, ok
}
