package http_test

import (
	stdhttp "net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// absentID is a well-formed id nothing has.
const absentID = "0190a0b0-0000-7000-8000-000000000000"

// A product is created and read, goes into a cart and becomes an order; a product that does not
// exist, and an order from an empty cart, are refused.
func TestProductCartOrder_PlaceAnOrderAndRefuseWhatIsMissing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	token, _ := h.userToken()
	productID := h.create("/admin/products", `{"name":"lamp","price":1000,"stock":5}`)["id"].(string)

	product := h.do(call{method: "GET", path: "/api/products/" + productID, token: token})
	require.Equal(t, stdhttp.StatusOK, product.Code, product.Body.String())
	assert.Equal(t, "lamp", answer(t, product)["name"])
	assertError(t, h.do(call{method: "GET", path: "/api/products/" + absentID, token: token}), stdhttp.StatusNotFound, "PRODUCT_NOT_FOUND")

	assertError(t, h.do(call{method: "POST", path: "/api/orders", token: token}), stdhttp.StatusBadRequest, "EMPTY_CART")
	assertError(t, h.do(call{method: "POST", path: "/api/cart/items", token: token,
		body: `{"productId":"` + absentID + `","quantity":1}`}), stdhttp.StatusNotFound, "PRODUCT_NOT_FOUND")
	added := h.do(call{method: "POST", path: "/api/cart/items", token: token, body: `{"productId":"` + productID + `","quantity":2}`})
	require.Equal(t, stdhttp.StatusCreated, added.Code, added.Body.String())
	cart := h.do(call{method: "GET", path: "/api/cart", token: token})
	require.Equal(t, stdhttp.StatusOK, cart.Code, cart.Body.String())
	assert.Len(t, answer(t, cart)["items"], 1)

	placed := h.do(call{method: "POST", path: "/api/orders", token: token})
	require.Equal(t, stdhttp.StatusCreated, placed.Code, placed.Body.String())
	orderID := answer(t, placed)["orderId"].(string)
	order := h.do(call{method: "GET", path: "/api/orders/" + orderID, token: token})
	require.Equal(t, stdhttp.StatusOK, order.Code, order.Body.String())
	assert.Equal(t, orderID, answer(t, order)["orderId"])
}

// placeOrder puts quantity units of productID in the cart of token's user and orders them.
func (h *harness) placeOrder(token, productID string, quantity int) string {
	h.t.Helper()
	added := h.do(call{method: "POST", path: "/api/cart/items", token: token,
		body: `{"productId":"` + productID + `","quantity":` + strconv.Itoa(quantity) + `}`})
	require.Equal(h.t, stdhttp.StatusCreated, added.Code, added.Body.String())
	placed := h.do(call{method: "POST", path: "/api/orders", token: token})
	require.Equal(h.t, stdhttp.StatusCreated, placed.Code, placed.Body.String())
	return answer(h.t, placed)["orderId"].(string)
}
