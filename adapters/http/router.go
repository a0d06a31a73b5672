// Package http is the driving HTTP adapter: a gin router that turns requests into use-case calls
// and answers in the JSON shapes of SPEC §0. It owns authentication (HS256 JWT), request ids,
// access logs, Prometheus metrics, panic recovery, body limits, the single table mapping error
// codes to statuses, and the embedded OpenAPI document served at /openapi.yaml.
package http

import (
	_ "embed"
	"log/slog"
	stdhttp "net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rushgate/rushgate/adapters/localblob"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/adapters/telemetry"
	appcatalog "github.com/rushgate/rushgate/application/catalog"
	appcoupon "github.com/rushgate/rushgate/application/coupon"
	appcrew "github.com/rushgate/rushgate/application/crew"
	apporder "github.com/rushgate/rushgate/application/order"
	"github.com/rushgate/rushgate/application/payment"
	"github.com/rushgate/rushgate/application/ranking"
	"github.com/rushgate/rushgate/application/relay"
	"github.com/rushgate/rushgate/application/verification"
	appwaiting "github.com/rushgate/rushgate/application/waiting"
	appwallet "github.com/rushgate/rushgate/application/wallet"
)

// DefaultMaxBodyBytes caps request bodies when Deps.MaxBodyBytes is zero.
const DefaultMaxBodyBytes int64 = 1 << 20

//go:embed openapi.yaml
var openAPIDocument []byte

// Deps is what the router needs. Every service, Tokens and Metrics are required.
type Deps struct {
	Crews         *appcrew.Service
	Wallets       *appwallet.Service
	Coupons       *appcoupon.Service
	Products      *appcatalog.Service
	Orders        *apporder.Service
	Payments      *payment.Service
	Relay         *relay.Service
	Ranking       *ranking.Service
	Verifications *verification.Service
	Events        *appwaiting.Service
	// Broker holds the push mode's SSE connections; nil on an instance that runs no broker,
	// whose SSE route then answers 503.
	Broker *appwaiting.Broker
	// SSEHeartbeat is the heartbeat comment period of SSE streams; 0 means DefaultSSEHeartbeat.
	SSEHeartbeat time.Duration
	// Uploads receives the embedded default's signed uploads; nil when uploads go to S3, and
	// the upload route then answers 404.
	Uploads *localblob.Store
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
	r.Use(requestID(logger), observe(d.Metrics, d.AccessLog), recovery(), validateQuery())
	r.NoRoute(func(c *gin.Context) { respondError(c, errRouteNotFound) })
	r.NoMethod(func(c *gin.Context) { respondError(c, errMethodNotAllowed) })

	r.GET("/healthz", healthz(system.ReadBuild()))
	r.GET("/readyz", readyz(d.Readiness))
	r.GET("/metrics", gin.WrapH(d.Metrics.Handler()))
	r.GET("/openapi.yaml", func(c *gin.Context) {
		c.Data(stdhttp.StatusOK, "application/yaml", openAPIDocument)
	})

	crews := crewHandlers{crews: d.Crews}
	verifications := verificationHandlers{service: d.Verifications, uploads: d.Uploads}
	// The signed URL authorises an upload, and bounds its body to the signed length.
	r.PUT(localblob.RoutePrefix+":key", verifications.upload)

	authed := r.Group("/", limitBody(maxBody), authenticate(d.Tokens))
	authed.POST("/crews", requireRole(RoleAdmin), crews.create)
	authed.GET("/crews/:crewId", crews.get)
	authed.GET("/crews/:crewId/members", crews.listMembers)
	authed.POST("/crews/:crewId/join", crews.join)
	authed.DELETE("/crews/:crewId/members/me", crews.leave)
	authed.POST("/admin/challenges", requireRole(RoleAdmin), verifications.createChallenge)
	authed.GET("/challenges/:challengeId", verifications.getChallenge)
	authed.GET("/challenges/:challengeId/verifications", verifications.listVerifications)
	authed.POST("/upload-sessions", verifications.createSession)
	authed.POST("/verifications", verifications.verify)

	wallets := walletHandlers{wallets: d.Wallets}
	authed.POST("/admin/users", requireRole(RoleAdmin), wallets.createUser)
	authed.GET("/api/users/:userId/balance", wallets.balance)
	authed.POST("/api/users/:userId/balance/charge", wallets.charge)

	coupons := couponHandlers{coupons: d.Coupons}
	authed.POST("/admin/coupons", requireRole(RoleAdmin), coupons.createCoupon)
	authed.POST("/api/coupons/:couponId/issue", coupons.issue)

	products := productHandlers{products: d.Products}
	authed.POST("/admin/products", requireRole(RoleAdmin), products.create)
	authed.GET("/api/products/:productId", products.get)
	cart := cartHandlers{orders: d.Orders}
	authed.POST("/api/cart/items", cart.addItem)
	authed.GET("/api/cart", cart.get)
	orders := orderHandlers{orders: d.Orders}
	authed.POST("/api/orders", orders.place)
	authed.GET("/api/orders/:orderId", orders.get)
	authed.POST("/api/orders/:orderId/cancel", orders.cancel)
	payments := paymentHandlers{payments: d.Payments, relay: d.Relay, ranking: d.Ranking}
	authed.GET("/api/products/top", payments.topProducts)
	authed.POST("/api/orders/:orderId/payment", payments.pay)
	authed.GET("/admin/outbox", requireRole(RoleAdmin), payments.listOutbox)
	authed.POST("/admin/outbox/:messageId/retry", requireRole(RoleAdmin), payments.retryOutbox)

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

	heartbeat := d.SSEHeartbeat
	if heartbeat <= 0 {
		heartbeat = DefaultSSEHeartbeat
	}
	push := pushHandlers{broker: d.Broker, writeTimeout: sseWriteTimeout,
		writers: newSSEWriters(sseWriterLimit, heartbeat)}
	browser := r.Group("/", queryToken(), limitBody(maxBody), authenticate(d.Tokens))
	browser.GET("/events/:eventId/tickets/waiting", push.wait)
	browser.GET("/events/:eventId/waiting-room", push.page)
	return r
}
