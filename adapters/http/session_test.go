package http_test

import (
	stdhttp "net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rhttp "github.com/rushgate/rushgate/adapters/http"
)

// startSession exchanges token for eventID's waiting-room session and returns the cookie set.
func (h *harness) startSession(eventID, token string) *stdhttp.Cookie {
	h.t.Helper()
	rec := h.do(call{method: "POST", path: "/events/" + eventID + "/waiting-room/session", token: token})
	require.Equal(h.t, stdhttp.StatusNoContent, rec.Code, rec.Body.String())
	cookies := rec.Result().Cookies()
	require.Len(h.t, cookies, 1)
	return cookies[0]
}

// withSession is c sent with the session cookie instead of a bearer token.
func withSession(c call, cookie *stdhttp.Cookie) call {
	c.header = map[string]string{"Cookie": rhttp.SessionCookie + "=" + cookie.Value}
	return c
}

// The session cookie is HttpOnly, SameSite=Strict, scoped to the event's paths, no longer-lived
// than the token it was exchanged for, and Secure when the request came over TLS.
func TestWaitingRoomSession_SetsAScopedCookieNoLongerThanTheToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	eventID := h.create("/admin/events", `{"name":"page","seats":1,"mode":"pull"}`)["id"].(string)
	const ttl = 10 * time.Minute
	token, err := h.tokens.Mint("session-user", rhttp.RoleUser, ttl)
	require.NoError(t, err)
	minted := time.Now()

	cookie := h.startSession(eventID, token)
	assert.Equal(t, rhttp.SessionCookie, cookie.Name)
	assert.Equal(t, "/events/"+eventID, cookie.Path)
	assert.True(t, cookie.HttpOnly, "HttpOnly")
	assert.Equal(t, stdhttp.SameSiteStrictMode, cookie.SameSite)
	assert.False(t, cookie.Secure, "Secure over plain HTTP: the browser would never send it back")
	assert.NotEqual(t, token, cookie.Value, "the cookie carries a session, not the bearer token")
	// The token's expiry is whole seconds after minted; the cookie ends no later.
	assert.LessOrEqual(t, cookie.MaxAge, int(ttl/time.Second))
	assert.Greater(t, cookie.MaxAge, int((ttl-time.Since(minted))/time.Second)-2)

	req := httptest.NewRequest("POST", "https://rushgate.test/events/"+eventID+"/waiting-room/session", stdhttp.NoBody)
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	h.router.ServeHTTP(rec, req)
	require.Equal(t, stdhttp.StatusNoContent, rec.Code, rec.Body.String())
	require.Len(t, rec.Result().Cookies(), 1)
	assert.True(t, rec.Result().Cookies()[0].Secure, "Secure over TLS")
}

// Without a valid bearer token the exchange answers 401 in JSON and sets no cookie.
func TestWaitingRoomSession_RefusesAMissingOrInvalidToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	eventID := h.create("/admin/events", `{"name":"page","seats":1,"mode":"pull"}`)["id"].(string)
	path := "/events/" + eventID + "/waiting-room/session"
	expired := signed(t, jwt.SigningMethodHS256,
		jwt.MapClaims{"sub": "late-user", "role": "user", "exp": time.Now().Add(-time.Minute).Unix()}, testSecret)
	foreign, err := rhttp.NewTokens([]byte("another-secret-of-decent-length-0")).Mint("u1", rhttp.RoleUser, time.Hour)
	require.NoError(t, err)

	for name, token := range map[string]string{"missing": "", "forged": foreign, "garbage": "not-a-jwt", "expired": expired} {
		rec := h.do(call{method: "POST", path: path, token: token})
		assertError(t, rec, stdhttp.StatusUnauthorized, "UNAUTHORIZED")
		assert.Empty(t, rec.Result().Cookies(), name)
	}
	rec := h.do(call{method: "POST", path: path, token: h.token("u1", rhttp.RoleUser), body: `{"userId":"u1"}`})
	assertError(t, rec, stdhttp.StatusBadRequest, "VALIDATION_FAILED")
	assert.Empty(t, rec.Result().Cookies())
	// An event id that is no UUID is no event's: no cookie for its path.
	rec = h.do(call{method: "POST", path: "/events/bad/waiting-room/session", token: h.token("u1", rhttp.RoleUser)})
	assertError(t, rec, stdhttp.StatusBadRequest, "VALIDATION_FAILED")
	assert.Empty(t, rec.Result().Cookies())
}

// The cookie authenticates its user on the event's pull routes and seat reservation, as the
// bearer token would; it is refused on another event, on an admin route, and as a bearer
// token, and a bearer token is no session.
func TestWaitingRoomSession_ActsOnItsOwnEventOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	eventA := h.create("/admin/events", `{"name":"a","seats":2,"slots":1,"mode":"pull"}`)["id"].(string)
	eventB := h.create("/admin/events", `{"name":"b","seats":2,"slots":1,"mode":"pull"}`)["id"].(string)
	token, userID := h.userToken()
	session := h.startSession(eventA, token)

	rec := h.do(withSession(call{method: "POST", path: "/events/" + eventA + "/queue"}, session))
	require.Equal(t, stdhttp.StatusCreated, rec.Code, rec.Body.String())
	rec = h.do(call{method: "GET", path: "/events/" + eventA + "/queue/status", token: token})
	require.Equal(t, stdhttp.StatusOK, rec.Code, "the cookie entered its own user: %s", rec.Body.String())
	assert.Equal(t, "ready", answer(t, rec)["status"])
	rec = h.do(withSession(call{method: "POST", path: "/events/" + eventA + "/queue/token"}, session))
	require.Equal(t, stdhttp.StatusCreated, rec.Code, rec.Body.String())
	entry := answer(t, rec)["token"].(string)
	rec = h.do(withSession(call{method: "GET", path: "/events/" + eventA + "/seats"}, session))
	require.Equal(t, stdhttp.StatusOK, rec.Code, rec.Body.String())
	reserve := withSession(call{method: "POST", path: "/events/" + eventA + "/seats/1/reservations"}, session)
	reserve.header[rhttp.EntryTokenHeader] = entry
	rec = h.do(reserve)
	require.Equal(t, stdhttp.StatusCreated, rec.Code, rec.Body.String())
	assert.Equal(t, userID, answer(t, rec)["userId"])

	// Event B: the cookie is refused and nobody entered B's queue.
	assertError(t, h.do(withSession(call{method: "POST", path: "/events/" + eventB + "/queue"}, session)),
		stdhttp.StatusUnauthorized, "UNAUTHORIZED")
	assertError(t, h.do(withSession(call{method: "GET", path: "/events/" + eventB + "/queue/status"}, session)),
		stdhttp.StatusUnauthorized, "UNAUTHORIZED")
	rec = h.do(call{method: "GET", path: "/admin/events/" + eventB + "/queue", token: h.admin()})
	require.Equal(t, stdhttp.StatusOK, rec.Code, rec.Body.String())
	assert.EqualValues(t, 0, answer(t, rec)["waiting"])
	assert.EqualValues(t, 0, answer(t, rec)["admitted"])

	// An admin's session acts on no admin route; a session is no bearer token, nor the reverse.
	adminSession := h.startSession(eventA, h.admin())
	assertError(t, h.do(withSession(call{method: "GET", path: "/admin/events/" + eventA + "/queue"}, adminSession)),
		stdhttp.StatusUnauthorized, "UNAUTHORIZED")
	assertError(t, h.do(call{method: "GET", path: "/events/" + eventA + "/queue/status", token: session.Value}),
		stdhttp.StatusUnauthorized, "UNAUTHORIZED")
	assertError(t, h.do(withSession(call{method: "GET", path: "/events/" + eventA + "/queue/status"}, &stdhttp.Cookie{Value: token})),
		stdhttp.StatusUnauthorized, "UNAUTHORIZED")
}
