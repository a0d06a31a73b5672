package http_test

import (
	"errors"
	"io"
	"net"
	stdhttp "net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	rhttp "github.com/rushgate/rushgate/adapters/http"
)

// failingBody yields prefix, then fails with err, as net/http's body reader does when the
// connection breaks or times out mid-body.
type failingBody struct {
	prefix io.Reader
	err    error
}

func (b *failingBody) Read(p []byte) (int, error) {
	if n, err := b.prefix.Read(p); err != io.EOF {
		return n, err
	}
	return 0, b.err
}

func TestBodyReadFailures_AreTheClients(t *testing.T) {
	t.Parallel()
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	cases := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"client hung up mid-body", io.ErrUnexpectedEOF, 499, "CLIENT_CLOSED_REQUEST"},
		{"connection reset mid-body", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, 499, "CLIENT_CLOSED_REQUEST"},
		{"body slower than the read timeout", timeout, stdhttp.StatusRequestTimeout, "REQUEST_TIMEOUT"},
		{"broken chunked framing", errors.New("invalid byte in chunk length"), stdhttp.StatusBadRequest, "VALIDATION_FAILED"},
	}
	// Both routes that read a body: creating a crew (admin) and joining one (optional body).
	routes := []struct {
		route string
		send  func(h *harness, crewID string, body io.Reader) *stdhttp.Request
	}{
		{"/crews", func(h *harness, _ string, body io.Reader) *stdhttp.Request {
			req := httptest.NewRequest("POST", "/crews", body)
			req.Header.Set("Authorization", "Bearer "+h.token("admin-1", rhttp.RoleAdmin))
			return req
		}},
		{"/crews/:crewId/join", func(h *harness, crewID string, body io.Reader) *stdhttp.Request {
			req := httptest.NewRequest("POST", "/crews/"+crewID+"/join", body)
			tok, _ := h.userToken()
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set(rhttp.IdempotencyKeyHeader, "k1")
			return req
		}},
	}
	for _, r := range routes {
		for _, tc := range cases {
			t.Run(r.route+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				h := newHarness(t, harnessConfig{})
				crewID := h.createCrew(3)
				req := r.send(h, crewID, &failingBody{prefix: strings.NewReader(`{"name":"half`), err: tc.err})
				req.Header.Set(rhttp.RequestIDHeader, "req-body")
				rec := httptest.NewRecorder()

				h.router.ServeHTTP(rec, req)

				assertError(t, rec, tc.status, tc.code)
				assert.Equal(t, int64(1), h.crews.created.Load(), "only the setup crew exists")
				h.assertSeats(crewID, 0)
				assert.False(t, hasLog(t, h, "req-body", "request failed"), "not logged as a server failure")
				assert.Contains(t, h.scrape(), `route="`+r.route+`",status="`+strconv.Itoa(tc.status)+`"`, "counted under its own status")
				assert.NotContains(t, h.scrape(), `status="500"`)
			})
		}
	}
}

func TestMalformedRequestTargets_AnswerJSON(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(3)
	tok, _ := h.userToken()
	cases := []struct {
		name, method, path, field string
	}{
		{"encoded slash in a crew id", "GET", "/crews/a%2Fb", "crewId"},
		{"encoded slash in a join", "POST", "/crews/" + crewID[:8] + "%2F" + crewID[9:] + "/join", "crewId"},
		{"NUL in a crew id", "GET", "/crews/%00", "crewId"},
		{"invalid UTF-8 in a crew id", "GET", "/crews/%C3%28", "crewId"},
		{"bad escape in the query", "GET", "/crews/" + crewID + "/members?limit=%zz", "query"},
		{"semicolon in the query", "GET", "/crews/" + crewID + "/members?limit=1;cursor=x", "query"},
		{"bad escape in an operational route's query", "GET", "/healthz?probe=%zz", "query"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := h.do(call{method: tc.method, path: tc.path, token: tok, idempotencyKey: "k-" + tc.name})

			body := assertError(t, rec, stdhttp.StatusBadRequest, "VALIDATION_FAILED")
			assert.Equal(t, tc.field, body.Field)
		})
	}
	h.assertSeats(crewID, 0)
}
