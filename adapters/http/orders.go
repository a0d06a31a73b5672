package http

import (
	stdhttp "net/http"

	"github.com/gin-gonic/gin"

	apporder "github.com/rushgate/rushgate/application/order"
)

// orderHandlers serves the order routes.
type orderHandlers struct {
	orders *apporder.Service
}

// placeOrderRequest is the optional body of POST /api/orders. userId is accepted only to be
// checked: the acting user always comes from the token.
type placeOrderRequest struct {
	UserID   *string `json:"userId"`
	CouponID *string `json:"couponId"`
}

// place answers POST /api/orders; an Idempotency-Key header is optional.
func (h orderHandlers) place(c *gin.Context) {
	user := principal(c).UserID
	var req placeOrderRequest
	if err := decodeJSON(c.Request, &req, true); err != nil {
		respondError(c, err)
		return
	}
	if err := checkClaimedUser(c, req.UserID); err != nil {
		respondError(c, err)
		return
	}
	res, err := h.orders.Place(c.Request.Context(), apporder.PlaceCommand{
		UserID: user, CouponID: req.CouponID, IdempotencyKey: c.GetHeader(IdempotencyKeyHeader),
	})
	respondGuarded(c, res, err, wireOrder)
}

// get answers GET /api/orders/{orderId} for the order's owner or an admin.
func (h orderHandlers) get(c *gin.Context) {
	p := principal(c)
	view, err := h.orders.Get(c.Request.Context(), apporder.GetQuery{
		OrderID: c.Param("orderId"), UserID: p.UserID, Admin: p.Role == RoleAdmin,
	})
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusOK, wireOrder(view))
}

// cancel answers POST /api/orders/{orderId}/cancel for the order's owner or an admin: 200 with
// the cancelled order, also when it was cancelled before.
func (h orderHandlers) cancel(c *gin.Context) {
	if !noBody(c) {
		return
	}
	p := principal(c)
	view, err := h.orders.Cancel(c.Request.Context(), apporder.CancelCommand{
		OrderID: c.Param("orderId"), UserID: p.UserID, Admin: p.Role == RoleAdmin,
	})
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusOK, wireOrder(view))
}

// OrderRoutes serves the orders placed from carts.
func OrderRoutes(orders *apporder.Service) Routes {
	h := orderHandlers{orders: orders}
	return func(g Groups) {
		g.API.POST("/api/orders", h.place)
		g.API.GET("/api/orders/:orderId", h.get)
		g.API.POST("/api/orders/:orderId/cancel", h.cancel)
	}
}
