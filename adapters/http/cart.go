package http

import (
	stdhttp "net/http"

	"github.com/gin-gonic/gin"

	apporder "github.com/rushgate/rushgate/application/order"
)

// cartHandlers serves the cart routes.
type cartHandlers struct {
	orders *apporder.Service
}

// addCartItemRequest is the body of POST /api/cart/items. userId is accepted only to be
// checked: the acting user always comes from the token.
type addCartItemRequest struct {
	UserID    *string `json:"userId"`
	ProductID string  `json:"productId"`
	Quantity  int     `json:"quantity"`
}

// addItem answers POST /api/cart/items.
func (h cartHandlers) addItem(c *gin.Context) {
	user := principal(c).UserID
	var req addCartItemRequest
	if err := decodeJSON(c.Request, &req, false); err != nil {
		respondError(c, err)
		return
	}
	if err := checkClaimedUser(c, req.UserID); err != nil {
		respondError(c, err)
		return
	}
	view, err := h.orders.AddToCart(c.Request.Context(), apporder.AddToCartCommand{
		UserID: user, ProductID: req.ProductID, Quantity: req.Quantity,
	})
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusCreated, wireCartItem(view))
}

// get answers GET /api/cart[?userId=]: the caller's cart, or, for an admin, the cart of the
// user named.
func (h cartHandlers) get(c *gin.Context) {
	p := principal(c)
	user := p.UserID
	if named, present := c.GetQuery("userId"); present && named != user {
		if p.Role != RoleAdmin {
			respondError(c, errForbidden)
			return
		}
		user = named
	}
	view, err := h.orders.Cart(c.Request.Context(), user)
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusOK, wireCart(view))
}

// CartRoutes serves the acting user's cart.
func CartRoutes(orders *apporder.Service) Routes {
	h := cartHandlers{orders: orders}
	return func(g Groups) {
		g.API.POST("/api/cart/items", h.addItem)
		g.API.GET("/api/cart", h.get)
		g.Query.Take(stdhttp.MethodGet, "/api/cart", "userId")
	}
}
