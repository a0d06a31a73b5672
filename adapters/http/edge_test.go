package http_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	stdhttp "net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rhttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/ports"
)

func TestUnknownRoute_IsJSONNotFound(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})

	for _, path := range []string{"/nope", "/crews/", "/CREWS"} {
		rec := h.do(call{method: "GET", path: path})
		assertError(t, rec, stdhttp.StatusNotFound, "NOT_FOUND")
	}
}

func TestWrongMethod_IsJSONMethodNotAllowed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})

	rec := h.do(call{method: "PUT", path: "/crews"})

	assertError(t, rec, stdhttp.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
	assert.Equal(t, "POST", rec.Header().Get("Allow"))
}

// HEAD and OPTIONS are served by no route: HEAD as GET would run a GET's effects for a client
// that reads no answer (the push stream enters the queue, a status poll refreshes the entry
// token), and no cross-origin client needs a preflight. Each is 405 METHOD_NOT_ALLOWED with
// Allow naming exactly the path's methods, on every path of the router, before authentication.
func TestHeadAndOptions_AreMethodNotAllowedWithAllow(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	methods := map[string][]string{} // each path template's methods
	for _, r := range h.router.Routes() {
		methods[r.Path] = append(methods[r.Path], r.Method)
	}
	for template, allowed := range methods {
		path := uuidPath(template, "admin-1")
		for _, method := range []string{stdhttp.MethodHead, stdhttp.MethodOptions} {
			rec := h.do(call{method: method, path: path})
			assertError(t, rec, stdhttp.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
			assert.ElementsMatch(t, allowed, strings.Split(rec.Header().Get("Allow"), ", "), "%s %s", method, template)
		}
	}
	assertError(t, h.do(call{method: stdhttp.MethodHead, path: "/nope"}), stdhttp.StatusNotFound, "NOT_FOUND")
}

func TestHugeBody_IsPayloadTooLarge(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	huge := `{"name":"` + strings.Repeat("x", 2<<20) + `","maxMembers":3}`

	rec := h.do(call{method: "POST", path: "/crews", token: h.token("admin-1", rhttp.RoleAdmin), body: huge})

	assertError(t, rec, stdhttp.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE")
	assert.Zero(t, h.crews.created.Load())
}

func TestBodyLimit_IsConfigurable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{maxBodyBytes: 64})
	crewID := h.createCrew(3)
	tok, user := h.userToken()
	padded := `{"userId":"` + user + `"}` + strings.Repeat(" ", 64)

	rec := h.do(call{method: "POST", path: "/crews/" + crewID + "/join", token: tok, idempotencyKey: "k1", body: padded})

	assertError(t, rec, stdhttp.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE")
	h.assertSeats(crewID, 0)
}

func TestPanic_IsInternalErrorWithoutInternals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(3)
	tok, _ := h.userToken()
	h.crews.panics.Store(true)

	rec := h.do(call{method: "POST", path: "/crews/" + crewID + "/join", token: tok, idempotencyKey: "k1",
		header: map[string]string{rhttp.RequestIDHeader: "req-panic-1"}})

	body := assertError(t, rec, stdhttp.StatusInternalServerError, "INTERNAL")
	assert.NotContains(t, rec.Body.String(), "hunter2")
	assert.NotContains(t, rec.Body.String(), "goroutine")
	assert.Equal(t, "internal server error", body.Message)
	// The lock holder serves a batch for others too, so the guard turns the panic into this
	// request's error rather than unwinding the server.
	assert.True(t, hasLog(t, h, "req-panic-1", "request failed"), "the panic is logged with the request id")
	var logged bool
	for _, line := range h.logs.lines(t) {
		logged = logged || strings.Contains(fmt.Sprint(line["error"]), "batch function panicked: driver exploded")
	}
	assert.True(t, logged, "the panic value is logged")

	// The guard released the lock and the key on the panic, so the same retry succeeds.
	h.crews.heal()
	h.assertSeats(crewID, 0)
	retry := h.do(call{method: "POST", path: "/crews/" + crewID + "/join", token: tok, idempotencyKey: "k1"})
	require.Equal(t, stdhttp.StatusCreated, retry.Code, retry.Body.String())
	h.assertSeats(crewID, 1)
}

func TestUnexpectedError_IsInternalErrorWithoutInternals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(3)
	tok, _ := h.userToken()
	h.crews.failWith(errors.New("pq: password authentication failed for user hunter2"))

	rec := h.do(call{method: "GET", path: "/crews/" + crewID, token: tok,
		header: map[string]string{rhttp.RequestIDHeader: "req-500"}})

	assertError(t, rec, stdhttp.StatusInternalServerError, "INTERNAL")
	assert.NotContains(t, rec.Body.String(), "hunter2")
	assert.Empty(t, rec.Header().Get("Retry-After"))
	assert.True(t, hasLog(t, h, "req-500", "request failed"), "the real error is logged with the request id")
}

func TestUnavailableDependency_IsServiceUnavailable(t *testing.T) {
	t.Parallel()
	for _, cause := range []error{ports.ErrUnavailable, context.DeadlineExceeded} {
		t.Run(cause.Error(), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{})
			crewID := h.createCrew(3)
			tok, _ := h.userToken()
			h.crews.failWith(fmt.Errorf("postgres 10.0.0.7:5432: %w", cause))

			join := h.join(crewID, tok, "k1")
			get := h.do(call{method: "GET", path: "/crews/" + crewID, token: tok})

			for _, rec := range []*httptest.ResponseRecorder{join, get} {
				assertError(t, rec, stdhttp.StatusServiceUnavailable, "UNAVAILABLE")
				assert.Equal(t, "1", rec.Header().Get("Retry-After"))
				assert.NotContains(t, rec.Body.String(), "10.0.0.7")
			}
			h.crews.heal()
			h.assertSeats(crewID, 0)
		})
	}
}

func TestRequestID_IsEchoedAndLogged(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	tok, user := h.userToken()
	unknownCrew := uuid.NewString()

	rec := h.do(call{method: "GET", path: "/crews/" + unknownCrew, token: tok,
		header: map[string]string{rhttp.RequestIDHeader: "trace-abc.123"}})

	assert.Equal(t, "trace-abc.123", rec.Header().Get(rhttp.RequestIDHeader))
	var access map[string]any
	for _, line := range h.logs.lines(t) {
		if line["requestId"] == "trace-abc.123" && line["msg"] == "http request" {
			access = line
		}
	}
	require.NotNil(t, access, "an access-log line carries the request id")
	assert.Equal(t, "GET", access["method"])
	assert.Equal(t, "/crews/:crewId", access["route"])
	assert.EqualValues(t, stdhttp.StatusNotFound, access["status"])
	assert.Equal(t, user, access["userId"])
	assert.Contains(t, access, "latencyMs")
}

// TestAccessLog_CarriesTheErrorCode: the access line of a refused or failed request names the
// code the client was answered; a success's line has none.
func TestAccessLog_CarriesTheErrorCode(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(1)
	tok, _ := h.userToken()
	other, _ := h.userToken()
	cases := []struct {
		name string
		call call
		code string
	}{
		{"joined", call{method: "POST", path: "/crews/" + crewID + "/join", token: tok, idempotencyKey: "k1"}, ""},
		{"full", call{method: "POST", path: "/crews/" + crewID + "/join", token: other, idempotencyKey: "k2"}, "CREW_FULL"},
		{"no key", call{method: "POST", path: "/crews/" + crewID + "/join", token: tok}, "IDEMPOTENCY_KEY_REQUIRED"},
		{"no token", call{method: "GET", path: "/crews/" + crewID}, "UNAUTHORIZED"},
		{"unknown route", call{method: "GET", path: "/nowhere", token: tok}, "NOT_FOUND"},
	}
	for i, tc := range cases {
		id := fmt.Sprintf("access-%d", i)
		tc.call.header = map[string]string{rhttp.RequestIDHeader: id}
		rec := h.do(tc.call)
		var access map[string]any
		for _, line := range h.logs.lines(t) {
			if line["requestId"] == id && line["msg"] == "http request" {
				access = line
			}
		}
		require.NotNil(t, access, "%s: no access line", tc.name)
		assert.EqualValues(t, rec.Code, access["status"], tc.name)
		if tc.code == "" {
			assert.NotContains(t, access, "errorCode", tc.name)
			continue
		}
		assert.Equal(t, tc.code, access["errorCode"], "%s answered %d %s", tc.name, rec.Code, rec.Body.String())
	}
}

// accessLines counts the access lines written so far.
func accessLines(t *testing.T, h *harness) int {
	t.Helper()
	n := 0
	for _, line := range h.logs.lines(t) {
		if line["msg"] == "http request" {
			n++
		}
	}
	return n
}

// TestAccessLog_LoweredBelowTheLoggersLevel: access lines at debug leave an info logger's output,
// while a failure is still logged.
func TestAccessLog_LoweredBelowTheLoggersLevel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{accessLog: rhttp.AccessLog{Level: slog.LevelDebug}})
	crewID := h.createCrew(3)
	tok, _ := h.userToken()
	h.crews.panics.Store(true)

	require.Equal(t, stdhttp.StatusOK, h.do(call{method: "GET", path: "/healthz"}).Code)
	rec := h.do(call{method: "POST", path: "/crews/" + crewID + "/join", token: tok, idempotencyKey: "k1",
		header: map[string]string{rhttp.RequestIDHeader: "lowered-1"}})

	require.Equal(t, stdhttp.StatusInternalServerError, rec.Code, rec.Body.String())
	assert.Equal(t, 0, accessLines(t, h), "no access line reaches an info logger")
	assert.True(t, hasLog(t, h, "lowered-1", "request failed"), "failures are still logged")
}

// TestAccessLog_SampledKeepsEveryRefusal: with one line in 3 kept, 9 successes write 3 lines and
// every 4xx writes its own.
func TestAccessLog_SampledKeepsEveryRefusal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{accessLog: rhttp.AccessLog{SampleEvery: 3}})
	for range 9 {
		require.Equal(t, stdhttp.StatusOK, h.do(call{method: "GET", path: "/healthz"}).Code)
	}
	assert.Equal(t, 3, accessLines(t, h), "one success in 3 is logged")

	for range 4 {
		require.Equal(t, stdhttp.StatusNotFound, h.do(call{method: "GET", path: "/nowhere"}).Code)
	}
	assert.Equal(t, 3+4, accessLines(t, h), "every refusal is logged")
}

func TestRequestID_IsGeneratedWhenMissingOrInsane(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})

	for _, incoming := range []string{"", "has space", "evil\"quote", strings.Repeat("a", 129)} {
		rec := h.do(call{method: "GET", path: "/healthz", header: map[string]string{rhttp.RequestIDHeader: incoming}})
		id := rec.Header().Get(rhttp.RequestIDHeader)
		_, err := uuid.Parse(id)
		assert.NoError(t, err, "a generated id replaces %q", incoming)
	}
}

// hasLog reports whether a log line with requestID and msg was written.
func hasLog(t *testing.T, h *harness, requestID, msg string) bool {
	t.Helper()
	for _, line := range h.logs.lines(t) {
		if line["requestId"] == requestID && line["msg"] == msg {
			return true
		}
	}
	return false
}

func TestClientGone_IsNotLoggedAsAFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(3)
	tok, _ := h.userToken()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest("POST", "/crews/"+crewID+"/join", stdhttp.NoBody).WithContext(ctx)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Idempotency-Key", "k1")
	req.Header.Set(rhttp.RequestIDHeader, "req-gone")
	rec := httptest.NewRecorder()

	h.router.ServeHTTP(rec, req)

	assert.Equal(t, 499, rec.Code, rec.Body.String())
	assert.False(t, hasLog(t, h, "req-gone", "request failed"), "a client leaving is not a server failure")
	assert.True(t, hasLog(t, h, "req-gone", "client closed the request"))
	h.assertSeats(crewID, 0)
}
