package http

import (
	"log/slog"
	stdhttp "net/http"

	"github.com/gin-gonic/gin"

	"github.com/rushgate/rushgate/application/payment"
	"github.com/rushgate/rushgate/application/ranking"
	"github.com/rushgate/rushgate/application/relay"
)

// paymentHandlers serves the payment, outbox and top products routes.
type paymentHandlers struct {
	payments *payment.Service
	relay    *relay.Service
	ranking  *ranking.Service
}

// topProducts answers GET /api/products/top: always 200, with an empty list when the read
// failed, which is logged at error level as a failed request is.
func (h paymentHandlers) topProducts(c *gin.Context) {
	top, err := h.ranking.TopProducts(c.Request.Context())
	if err != nil {
		requestLogger(c).LogAttrs(c.Request.Context(), slog.LevelError, "failed to query popular products; answering an empty list",
			slog.String("error", err.Error()))
	}
	writeJSON(c, stdhttp.StatusOK, wireTopProducts(top))
}

// pay answers POST /api/orders/{orderId}/payment, guarded by the Idempotency-Key header.
func (h paymentHandlers) pay(c *gin.Context) {
	user, err := actingUser(c)
	if err != nil {
		respondError(c, err)
		return
	}
	res, err := h.payments.Pay(c.Request.Context(), payment.PayCommand{
		OrderID: c.Param("orderId"), UserID: user, IdempotencyKey: c.GetHeader(IdempotencyKeyHeader),
	})
	respondGuarded(c, res, err, wirePayment)
}

// listOutbox answers GET /admin/outbox?status= (admin).
func (h paymentHandlers) listOutbox(c *gin.Context) {
	query, err := pageQuery(c)
	if err != nil {
		respondError(c, err)
		return
	}
	status, err := optionalQuery(c, "status")
	if err != nil {
		respondError(c, err)
		return
	}
	page, err := h.relay.List(c.Request.Context(), status, query.limit, query.cursor)
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusOK, wireOutboxPage(page))
}

// retryOutbox answers POST /admin/outbox/{messageId}/retry (admin).
func (h paymentHandlers) retryOutbox(c *gin.Context) {
	if !noBody(c) {
		return
	}
	view, err := h.relay.Retry(c.Request.Context(), c.Param("messageId"))
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusOK, wireOutboxMessage(view))
}

// PaymentRoutes serves payments, the outbox that delivers them and the top products they rank.
func PaymentRoutes(payments *payment.Service, relay *relay.Service, ranking *ranking.Service) Routes {
	h := paymentHandlers{payments: payments, relay: relay, ranking: ranking}
	return func(g Groups) {
		g.API.GET("/api/products/top", h.topProducts)
		g.API.POST("/api/orders/:orderId/payment", h.pay)
		g.API.GET("/admin/outbox", requireRole(RoleAdmin), h.listOutbox)
		g.Query.Take(stdhttp.MethodGet, "/admin/outbox", append([]string{"status"}, pageParameters...)...)
		g.API.POST("/admin/outbox/:messageId/retry", requireRole(RoleAdmin), h.retryOutbox)
	}
}
