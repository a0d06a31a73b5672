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

// A token that authenticated a request is remembered as verified, except on the routes that
// hold their connection (the SSE stream's group), where it would stay in memory for the
// stream's life. Each group is asked with a token of its own, by header and, for the browser's
// group, by query string as EventSource sends it.
func TestRouter_RemembersTokensExceptForHeldConnections(t *testing.T) {
	t.Parallel()
	gin.SetMode(gin.TestMode)
	tokens := NewTokens([]byte("credentials-test-secret-credentials-test"))
	ok := func(c *gin.Context) { c.Status(stdhttp.StatusNoContent) }
	router := NewRouter(Deps{
		Tokens:  tokens,
		Metrics: telemetry.NewMetrics(prometheus.NewRegistry()),
		Routes: []Routes{func(g Groups) {
			g.API.GET("/api", ok)
			g.Event.GET("/events/:eventId/event", ok)
			g.Browser.GET("/events/:eventId/browser", ok)
		}},
	})
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
		{name: "Browser, header", path: "/events/e1/browser"},
		{name: "Browser, query", path: "/events/e1/browser", query: true},
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
