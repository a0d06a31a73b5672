package http

import (
	stdhttp "net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/telemetry"
)

func testRouter(t *testing.T, tokens *Tokens) *gin.Engine {
	t.Helper()
	gin.SetMode(gin.TestMode)
	ok := func(c *gin.Context) { c.Status(stdhttp.StatusNoContent) }
	return NewRouter(Deps{
		Tokens:  tokens,
		Metrics: telemetry.NewMetrics(prometheus.NewRegistry()),
		Routes: []Routes{func(g Groups) {
			g.API.GET("/api", ok)
			g.Event.GET("/events/:eventId/event", ok)
			g.Browser.GET("/events/:eventId/tickets/waiting", ok)
			g.Query.Take(stdhttp.MethodGet, "/events/:eventId/tickets/waiting", accessTokenParameter)
		}},
	})
}

// A token that authenticated a request is remembered as verified, except on the routes that
// hold their connection (the SSE stream's group), where it would stay in memory for the
// stream's life. Each group is asked with a token of its own, by header and, for the browser's
// group, by query string as EventSource sends it.
func TestRouter_RemembersTokensExceptForHeldConnections(t *testing.T) {
	t.Parallel()
	tokens := NewTokens([]byte("credentials-test-secret-credentials-test"))
	router := testRouter(t, tokens)
	mint := func(user string) string {
		raw, err := tokens.Mint(user, RoleUser, time.Hour)
		require.NoError(t, err)
		return raw
	}
	cases := []struct {
		name, path string
		query      bool
		remembered bool
	}{
		{name: "API", path: "/api", remembered: true},
		{name: "Event", path: "/events/e1/event", remembered: true},
		{name: "Browser, header", path: "/events/e1/tickets/waiting"},
		{name: "Browser, query", path: "/events/e1/tickets/waiting", query: true},
	}
	for i, tc := range cases {
		raw := mint("u" + string(rune('a'+i)))
		req := httptest.NewRequest(stdhttp.MethodGet, tc.path, nil)
		if tc.query {
			req.URL.RawQuery = "access_token=" + raw
		} else {
			req.Header.Set("Authorization", "Bearer "+raw)
		}
		rec := httptest.NewRecorder()
		router.ServeHTTP(rec, req)
		require.Equal(t, stdhttp.StatusNoContent, rec.Code, tc.name)
		_, remembered := tokens.verified.lookup(raw, time.Now())
		assert.Equal(t, tc.remembered, remembered, tc.name)
	}
}

// An event's sessions are checked with Tokens kept from its first accepted session on, which
// remember the sessions they verified, as bearer tokens are; a refused session keeps nothing,
// and past keptSessionEvents events nothing more is kept while sessions are still accepted.
func TestRouter_KeepsTheSessionsOfEventsWithAnAcceptedSession(t *testing.T) {
	t.Parallel()
	tokens := NewTokens([]byte("credentials-test-secret-credentials-test"))
	router := testRouter(t, tokens)
	session := func(eventID string) string {
		raw, err := tokens.sessions(eventID).mintUntil("u1", RoleUser, time.Now(), time.Now().Add(time.Hour))
		require.NoError(t, err)
		return raw
	}
	call := func(eventID, session string) int {
		req := httptest.NewRequest(stdhttp.MethodGet, "/events/"+eventID+"/event", nil)
		req.AddCookie(&stdhttp.Cookie{Name: SessionCookie, Value: session})
		rec := httptest.NewRecorder()
		router.ServeHTTP(rec, req)
		return rec.Code
	}
	kept := func(eventID string) *Tokens {
		s, ok := tokens.eventSessions.Load(eventID)
		if !ok {
			return nil
		}
		return s.(*Tokens)
	}

	e1 := session("e1")
	require.Nil(t, kept("e1"), "nothing kept before a session is accepted")
	require.Equal(t, stdhttp.StatusNoContent, call("e1", e1))
	sessions := kept("e1")
	require.NotNil(t, sessions, "e1's sessions kept")
	_, remembered := sessions.verified.lookup(e1, time.Now())
	assert.True(t, remembered, "the accepted session remembered")
	require.Equal(t, stdhttp.StatusNoContent, call("e1", e1))
	assert.Same(t, sessions, tokens.sessions("e1"), "the same Tokens answer e1 again")

	assert.Equal(t, stdhttp.StatusUnauthorized, call("e2", e1), "e1's session at e2")
	assert.Nil(t, kept("e2"), "a refused session keeps nothing")

	tokens.keptEventSessions.Store(keptSessionEvents)
	assert.Equal(t, stdhttp.StatusNoContent, call("e3", session("e3")))
	assert.Nil(t, kept("e3"), "nothing kept past keptSessionEvents")
}
