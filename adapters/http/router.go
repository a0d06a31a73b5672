// Package http is the driving HTTP adapter: a gin router that turns requests into use-case calls
// and answers in the JSON shapes of SPEC §0. It owns authentication (HS256 JWT), request ids,
// access logs, Prometheus metrics, panic recovery, body limits, the single table mapping error
// codes to statuses, and the embedded OpenAPI document served at /openapi.yaml.
package http

import (
	_ "embed"
	"log/slog"
	stdhttp "net/http"

	"github.com/gin-gonic/gin"

	"github.com/rushgate/rushgate/adapters/telemetry"
	appcrew "github.com/rushgate/rushgate/application/crew"
	appwaiting "github.com/rushgate/rushgate/application/waiting"
)

// DefaultMaxBodyBytes caps request bodies when Deps.MaxBodyBytes is zero.
const DefaultMaxBodyBytes int64 = 1 << 20

//go:embed openapi.yaml
var openAPIDocument []byte

// Deps is what the router needs. Crews, Events, Tokens and Metrics are required.
type Deps struct {
	Crews   *appcrew.Service
	Events  *appwaiting.Service
	Tokens  *Tokens
	Metrics *telemetry.Metrics
	// Logger receives access logs and errors; nil means slog.Default().
	Logger *slog.Logger
	// Readiness lists the dependencies /readyz probes (database, redis).
	Readiness []telemetry.ReadinessCheck
	// MaxBodyBytes caps request bodies (413 beyond it); 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// NewRouter builds the gin engine with every route of the server. The caller chooses gin's mode
// (gin.SetMode) before calling it.
func NewRouter(d Deps) *gin.Engine {
	logger := d.Logger
	if logger == nil {
		logger = slog.Default()
	}
	maxBody := d.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}

	r := gin.New()
	// Unknown paths answer a JSON 404, never a redirect with an HTML body.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true
	// Log the peer address, not a client-supplied X-Forwarded-For.
	r.ForwardedByClientIP = false
	// Route on the escaped path and unescape each parameter, so an encoded slash stays inside
	// its segment ("/crews/a%2Fb" is crew "a/b", refused by validation) instead of making a
	// different path.
	r.UseEscapedPath = true
	r.UnescapePathValues = true
	r.Use(requestID(logger), observe(d.Metrics), recovery(), validateQuery(), limitBody(maxBody))
	r.NoRoute(func(c *gin.Context) { respondError(c, errRouteNotFound) })
	r.NoMethod(func(c *gin.Context) { respondError(c, errMethodNotAllowed) })

	r.GET("/healthz", healthz)
	r.GET("/readyz", readyz(d.Readiness))
	r.GET("/metrics", gin.WrapH(d.Metrics.Handler()))
	r.GET("/openapi.yaml", func(c *gin.Context) {
		c.Data(stdhttp.StatusOK, "application/yaml", openAPIDocument)
	})

	crews := crewHandlers{crews: d.Crews}
	authed := r.Group("/", authenticate(d.Tokens))
	authed.POST("/crews", requireRole(RoleAdmin), crews.create)
	authed.GET("/crews/:crewId", crews.get)
	authed.GET("/crews/:crewId/members", crews.listMembers)
	authed.POST("/crews/:crewId/join", crews.join)
	authed.DELETE("/crews/:crewId/members/me", crews.leave)

	events := eventHandlers{events: d.Events}
	authed.POST("/admin/events", requireRole(RoleAdmin), events.create)
	authed.PATCH("/admin/events/:eventId", requireRole(RoleAdmin), events.patch)
	authed.GET("/admin/events/:eventId/queue", requireRole(RoleAdmin), events.queue)
	authed.GET("/events/:eventId/seats", events.seats)
	authed.POST("/events/:eventId/seats/:seatId/reservations", events.reserve)
	authed.POST("/events/:eventId/queue", events.enter)
	authed.GET("/events/:eventId/queue/status", events.status)
	authed.POST("/events/:eventId/queue/token", events.claim)
	authed.DELETE("/events/:eventId/queue/token", events.giveBack)
	return r
}
