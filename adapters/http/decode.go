package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	stdhttp "net/http"
	"reflect"
	"strconv"
	"strings"
	"syscall"

	"github.com/rushgate/rushgate/domain"
)

// bodyField names the request body in validation errors that are not about one field.
const bodyField = "body"

// decodeJSON strictly decodes the request body into dst: exactly one JSON value, no unknown
// fields, no trailing data. An empty body is allowed only when optional. Every failure is a
// VALIDATION_FAILED naming the field, or PAYLOAD_TOO_LARGE past the body limit.
func decodeJSON(r *stdhttp.Request, dst any, optional bool) error {
	// Read it all first so the size limit is enforced however much of it the decoder would use.
	// A request without a body (net/http's NoBody: Content-Length 0, not chunked) has nothing
	// to read.
	var raw []byte
	if r.Body != nil && r.Body != stdhttp.NoBody {
		var err error
		if raw, err = io.ReadAll(r.Body); err != nil {
			return bodyReadError(err)
		}
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		if optional {
			return nil
		}
		return domain.Invalid(bodyField, "a JSON object is required")
	}

	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return domain.Invalid(bodyField, "must hold a single JSON value")
	}
	return nil
}

// bodyReadError names why the request body could not be read. Each cause is the client's: a
// body over the limit (413), one not sent within the server's read timeout (408), a connection
// that ended mid-body (499, errBodyTruncated) or broken framing such as bad chunked encoding
// (400).
func bodyReadError(err error) error {
	var netErr net.Error
	switch _, tooLarge := errors.AsType[*stdhttp.MaxBytesError](err); {
	case tooLarge:
		return errPayloadTooLarge
	case errors.As(err, &netErr) && netErr.Timeout():
		return errRequestTimeout
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("read request body: %w: %w", errBodyTruncated, err)
	default:
		return domain.Invalid(bodyField, "could not be read: malformed framing")
	}
}

// decodeError turns an encoding/json failure into a VALIDATION_FAILED naming the field.
func decodeError(err error) error {
	if typeErr, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		field := typeErr.Field
		if field == "" {
			field = bodyField
		}
		return domain.Invalid(field, "must be %s", jsonKind(typeErr.Type.Kind()))
	}
	// encoding/json has no typed error for unknown fields, only this message.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if unquoted, uerr := strconv.Unquote(name); uerr == nil {
			name = unquoted
		}
		return domain.Invalid(name, "is not a known field")
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return domain.Invalid(bodyField, "malformed JSON: unexpected end of input")
	}
	if syntaxErr, ok := errors.AsType[*json.SyntaxError](err); ok {
		return domain.Invalid(bodyField, "malformed JSON at offset %d", syntaxErr.Offset)
	}
	return domain.Invalid(bodyField, "malformed JSON")
}

// jsonKind names a Go kind the way a JSON client thinks of it.
func jsonKind(kind reflect.Kind) string {
	switch kind {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}
