package http_test

import (
	"encoding/json"
	stdhttp "net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A payment without a usable Idempotency-Key is refused for it before the order is looked up,
// whether the order exists or not.
func TestPayment_RefusesAMissingKeyBeforeLookingUpTheOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	productID := h.create("/admin/products", `{"name":"lamp","price":1000,"stock":5}`)["id"].(string)
	payer, _ := h.userToken()
	for name, orderID := range map[string]string{"known order": h.placeOrder(payer, productID, 1), "unknown order": uuid.NewString()} {
		t.Run(name, func(t *testing.T) {
			missing := h.do(call{method: "POST", path: "/api/orders/" + orderID + "/payment", token: payer})
			assertError(t, missing, stdhttp.StatusBadRequest, "IDEMPOTENCY_KEY_REQUIRED")
			tooLong := h.do(call{method: "POST", path: "/api/orders/" + orderID + "/payment", token: payer,
				idempotencyKey: strings.Repeat("k", 256)})
			assertError(t, tooLong, stdhttp.StatusBadRequest, "VALIDATION_FAILED")
		})
	}
}

// An order is paid from the balance and its message waits in the outbox, which admins see; a
// balance too small is refused, and a user may not see the outbox.
func TestPayment_PaysAndShowsTheOutboxAndRefusesAShortBalance(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	productID := h.create("/admin/products", `{"name":"lamp","price":1000,"stock":5}`)["id"].(string)
	payer, payerID := h.userToken()
	poor, poorID := h.userToken()
	h.create("/admin/users", `{"id":"`+payerID+`","balance":2500}`)
	h.create("/admin/users", `{"id":"`+poorID+`","balance":10}`)
	pay := func(token, orderID, key string) *httptest.ResponseRecorder {
		return h.do(call{method: "POST", path: "/api/orders/" + orderID + "/payment", token: token, idempotencyKey: key})
	}

	orderID := h.placeOrder(payer, productID, 2)
	paid := pay(payer, orderID, "k1")
	require.Equal(t, stdhttp.StatusOK, paid.Code, paid.Body.String())
	assert.EqualValues(t, 2000, answer(t, paid)["paidAmount"])
	assert.EqualValues(t, 500, answer(t, paid)["remainingBalance"])

	short := pay(poor, h.placeOrder(poor, productID, 1), "k2")
	assertError(t, short, stdhttp.StatusBadRequest, "INSUFFICIENT_BALANCE")
	assert.EqualValues(t, 10, answer(t, short)["currentBalance"])

	outbox := h.do(call{method: "GET", path: "/admin/outbox", token: h.admin()})
	require.Equal(t, stdhttp.StatusOK, outbox.Code, outbox.Body.String())
	var listed struct {
		Items []struct {
			Status  string `json:"status"`
			Payload struct {
				OrderID string `json:"orderId"`
			} `json:"payload"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal(outbox.Body.Bytes(), &listed))
	require.Len(t, listed.Items, 1, outbox.Body.String())
	assert.Equal(t, orderID, listed.Items[0].Payload.OrderID)
	assertError(t, h.do(call{method: "GET", path: "/admin/outbox", token: payer}), stdhttp.StatusForbidden, "FORBIDDEN")
	assertError(t, h.do(call{method: "GET", path: "/admin/outbox?status=LOST", token: h.admin()}), stdhttp.StatusBadRequest, "VALIDATION_FAILED")
}
