package http

import (
	stdhttp "net/http"

	"github.com/gin-gonic/gin"

	"github.com/rushgate/rushgate/application/payment"
	"github.com/rushgate/rushgate/application/ranking"
	"github.com/rushgate/rushgate/application/relay"
)

// paymentHandlers serves the payment, outbox and top products routes (SPEC §4).
type paymentHandlers struct {
	payments *payment.Service
	relay    *relay.Service
	ranking  *ranking.Service
}

// topProducts answers GET /api/products/top: always 200, with an empty list when the read
// failed.
func (h paymentHandlers) topProducts(c *gin.Context) {
	c.JSON(stdhttp.StatusOK, h.ranking.TopProducts(c.Request.Context()))
}

// payRequest is the optional body of a payment. userId is accepted only to be checked: the
// acting user always comes from the token.
type payRequest struct {
	UserID *string `json:"userId"`
}

// pay answers POST /api/orders/{orderId}/payment, guarded by the Idempotency-Key header.
func (h paymentHandlers) pay(c *gin.Context) {
	var req payRequest
	if err := decodeJSON(c.Request, &req, true); err != nil {
		respondError(c, err)
		return
	}
	if err := checkClaimedUser(c, req.UserID); err != nil {
		respondError(c, err)
		return
	}
	res, err := h.payments.Pay(c.Request.Context(), payment.PayCommand{
		OrderID: c.Param("orderId"), UserID: principal(c).UserID, IdempotencyKey: c.GetHeader(IdempotencyKeyHeader),
	})
	if err != nil {
		respondError(c, err)
		return
	}
	respondGuarded(c, res)
}

// listOutbox answers GET /admin/outbox?status= (admin).
func (h paymentHandlers) listOutbox(c *gin.Context) {
	limit, err := pageLimit(c, relay.MaxPageLimit)
	if err != nil {
		respondError(c, err)
		return
	}
	page, err := h.relay.List(c.Request.Context(), c.Query("status"), limit, c.Query("cursor"))
	if err != nil {
		respondError(c, err)
		return
	}
	c.JSON(stdhttp.StatusOK, page)
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
	c.JSON(stdhttp.StatusOK, view)
}
