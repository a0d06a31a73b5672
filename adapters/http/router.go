// Package http is the driving HTTP adapter: a gin router that turns requests into use-case calls
// and answers in the API's JSON shapes. It owns authentication (HS256 JWT), request ids,
// access logs, Prometheus metrics, panic recovery, body limits, the single table mapping error
// codes to statuses, and the embedded OpenAPI document served at /openapi.yaml.
package http

import (
	_ "embed"
	"log/slog"
	stdhttp "net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/trace"

	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/adapters/telemetry"
)

// DefaultMaxBodyBytes caps request bodies when Deps.MaxBodyBytes is zero.
const DefaultMaxBodyBytes int64 = 1 << 20

//go:embed openapi.yaml
var openAPIDocument []byte

// Deps is what the router needs besides the flows' routes. Tokens and Metrics are required.
type Deps struct {
	// Routes are every flow's routes; each flow's handler file builds its own (CrewRoutes, …).
	Routes  []Routes
	Tokens  *Tokens
	Metrics *telemetry.Metrics
	// Logger receives access logs and errors; nil means slog.Default().
	Logger *slog.Logger
	// Readiness lists the dependencies /readyz probes (database, redis, storage).
	Readiness []telemetry.ReadinessCheck
	// MaxBodyBytes caps request bodies (413 beyond it); 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// AccessLog says which requests get an access line; the zero value logs each at info.
	AccessLog AccessLog
	// Tracing, when set, starts a server span for each request (see tracing.go).
	Tracing trace.TracerProvider
}

// Routes registers one flow's routes on the router's groups, and declares in Groups.Query the
// query parameters of those that take any.
type Routes func(g Groups)

// Groups are the router's route groups, each with its own authentication.
type Groups struct {
	// Public serves without a token: a route that authorises itself, such as a signed URL.
	Public *gin.RouterGroup
	// API bounds the body and authenticates the bearer token of the Authorization header.
	API *gin.RouterGroup
	// Event is API that also takes the waiting-room session cookie of the event its routes name
	// (:eventId) instead of the Authorization header: the routes the waiting page calls.
	Event *gin.RouterGroup
	// Browser is Event that also takes the token from the query string (?access_token=, which
	// its routes declare in Query), for EventSource clients, which cannot set headers; its
	// routes hold their connection for a stream's life.
	Browser *gin.RouterGroup
	// Query declares the query parameters of the routes that take any; every other route
	// refuses any query parameter.
	Query QueryParameters
}

// AccessLog lowers or thins the access log of a busy server.
type AccessLog struct {
	// Level is the level of the access lines (slog.LevelInfo, the zero value, by default): at
	// debug they leave the info logs.
	Level slog.Level
	// SampleEvery keeps one access line in SampleEvery for requests answered below 400; 0 and
	// 1 keep them all. The line of a refused or failed request (4xx, 5xx) is always kept.
	SampleEvery int
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
	if d.Tracing != nil {
		r.Use(traceRequests(d.Tracing))
	}
	params := QueryParameters{}
	r.Use(requestID(logger), observe(d.Metrics, d.AccessLog), recovery(), validateQuery(params))
	r.NoRoute(func(c *gin.Context) { respondError(c, errRouteNotFound) })

	r.GET("/healthz", healthz(system.ReadBuild()))
	r.GET("/readyz", readyz(d.Readiness))
	r.GET("/metrics", gin.WrapH(d.Metrics.Handler()))
	r.GET("/openapi.yaml", func(c *gin.Context) {
		c.Data(stdhttp.StatusOK, "application/yaml", openAPIDocument)
	})

	groups := Groups{
		Public: &r.RouterGroup,
		API:    r.Group("/", limitBody(maxBody), authenticate(d.Tokens, credentials{})),
		Event:  r.Group("/", limitBody(maxBody), authenticate(d.Tokens, credentials{sessionCookie: true})),
		Browser: r.Group("/", queryToken(), limitBody(maxBody),
			authenticate(d.Tokens, credentials{sessionCookie: true, heldConnection: true})),
		Query: params,
	}
	for _, register := range d.Routes {
		register(groups)
	}
	// HEAD and OPTIONS are no exception: no route serves them, so they are 405 too.
	r.NoMethod(methodNotAllowed(newRouteIndex(r.Routes())))
	return r
}

// methodNotAllowed answers 405 METHOD_NOT_ALLOWED with the Allow header gin set, less the
// methods whose routes do not match the path. gin's lookup reuses one request's backtracking
// state from one method's routes to the next (gin 1.12), so a path that a static route matched
// next to a parameter route lists methods it lacks: PUT /api/products/top was told "GET, POST".
func methodNotAllowed(routes routeIndex) gin.HandlerFunc {
	return func(c *gin.Context) {
		path := c.Request.URL.EscapedPath() // what the router matches (UseEscapedPath)
		var allowed []string
		for method := range strings.SplitSeq(c.Writer.Header().Get("Allow"), ", ") {
			if routes.serves(method, path) {
				allowed = append(allowed, method)
			}
		}
		if len(allowed) > 0 {
			c.Header("Allow", strings.Join(allowed, ", "))
		}
		respondError(c, errMethodNotAllowed)
	}
}

// routeIndex holds the router's route templates by method, split into path segments.
type routeIndex map[string][][]string

func newRouteIndex(routes gin.RoutesInfo) routeIndex {
	index := routeIndex{}
	for _, r := range routes {
		index[r.Method] = append(index[r.Method], strings.Split(r.Path, "/"))
	}
	return index
}

// serves reports whether a route of method matches path: segment by segment, a parameter
// (":id") matching any one segment and a catch-all ("*rest") the rest.
func (index routeIndex) serves(method, path string) bool {
	segments := strings.Split(path, "/")
	for _, template := range index[method] {
		if templateMatches(template, segments) {
			return true
		}
	}
	return false
}

func templateMatches(template, segments []string) bool {
	for i, t := range template {
		switch {
		case strings.HasPrefix(t, "*"):
			return true
		case i >= len(segments):
			return false
		case !strings.HasPrefix(t, ":") && t != segments[i]:
			return false
		}
	}
	return len(template) == len(segments)
}
