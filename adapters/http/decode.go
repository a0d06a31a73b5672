package http

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	stdhttp "net/http"
	"reflect"
	"syscall"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/rushgate/rushgate/domain"
)

// bodyField names the request body in validation errors that are not about one field.
const bodyField = "body"

// jsonWhitespace is every byte JSON allows around a value (RFC 8259 §2).
const jsonWhitespace = " \t\n\r"

// decodeJSON reads the request body into dst with unmarshalStrict. An empty body is allowed only
// when optional. Every failure is a VALIDATION_FAILED naming the field, or PAYLOAD_TOO_LARGE
// past the body limit.
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
	// Only JSON's own whitespace makes a body empty: bytes.TrimSpace would also drop \v, \f,
	// U+0085 and U+00A0, none of which JSON allows, and a body of them would pass as no body.
	value := jsontext.Value(bytes.Trim(raw, jsonWhitespace))
	if len(value) == 0 {
		if optional {
			return nil
		}
		return domain.Invalid(bodyField, "a JSON object is required")
	}
	// go-json-experiment/json reads null into a struct as an object with no member, so a body
	// of null would pass, on a route whose members are all optional, for {}. A null member is
	// what it should be: that member absent.
	if value.Kind() == 'n' {
		return domain.Invalid(bodyField, "must be a JSON object, not null")
	}

	if err := unmarshalStrict(raw, dst); err != nil {
		return decodeError(err)
	}
	return nil
}

// unmarshalStrict reads data into dst by the rules for every JSON rushgate reads, request
// bodies and token claims alike: exactly one JSON value and nothing after it, valid UTF-8
// throughout (never patched to U+FFFD), no object member named twice, names matched exactly as
// written (another letter case is another, unknown, name) and no unknown member. These are
// go-json-experiment/json's defaults plus RejectUnknownMembers; a type that takes members it
// does not know (token claims) reads them in its own UnmarshalJSONFrom, under the same
// tokenizer. Its errors are go-json-experiment/json's; decodeError names them for a client.
func unmarshalStrict(data []byte, dst any) error {
	return jsonv2.Unmarshal(data, dst, jsonv2.RejectUnknownMembers(true))
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

// decodeError turns a go-json-experiment/json failure into a VALIDATION_FAILED naming the
// member it is about, or the body when it is about no member (trailing text, a truncated value).
func decodeError(err error) error {
	if semErr, ok := errors.AsType[*jsonv2.SemanticError](err); ok {
		field := fieldAt(semErr.JSONPointer)
		switch {
		case errors.Is(semErr.Err, jsonv2.ErrUnknownName):
			return domain.Invalid(field, "is not a known field (names match exactly, letter case included)")
		case semErr.GoType != nil:
			return domain.Invalid(field, "must be %s", jsonKind(semErr.GoType.Kind()))
		}
		return domain.Invalid(field, "could not be read")
	}
	if synErr, ok := errors.AsType[*jsontext.SyntacticError](err); ok {
		field := fieldAt(synErr.JSONPointer)
		switch {
		case errors.Is(synErr.Err, jsontext.ErrDuplicateName):
			return domain.Invalid(field, "is given more than once")
		case errors.Is(synErr.Err, io.ErrUnexpectedEOF):
			return domain.Invalid(bodyField, "malformed JSON: unexpected end of input")
		}
		return domain.Invalid(field, "malformed JSON at offset %d: %v", synErr.ByteOffset, synErr.Err)
	}
	return domain.Invalid(bodyField, "malformed JSON")
}

// fieldAt names the member a JSON Pointer ends at: the body itself for the empty pointer.
func fieldAt(ptr jsontext.Pointer) string {
	if name := ptr.LastToken(); name != "" {
		return name
	}
	return bodyField
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
