package http_test

import (
	"context"
	"encoding/json"
	"errors"
	stdhttp "net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	rhttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/ports"
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

// failingTopSelling fails the top products' read, as a database that is down does.
type failingTopSelling struct{ ports.OrderRepository }

func (failingTopSelling) TopSelling(context.Context, time.Time, int) ([]order.Sales, error) {
	return nil, errors.New("connection refused")
}

// The failed read of the top products is logged, at error level, with the request id of the
// request it answered, as every other line logged for a request is.
func TestTopProducts_AFailedReadIsLoggedWithTheRequestID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{options: []fx.Option{
		fx.Decorate(func(stores ports.CommerceStores) ports.CommerceStores {
			stores.Orders = failingTopSelling{stores.Orders}
			return stores
		}),
	}})
	tok, _ := h.userToken()

	rec := h.do(call{method: "GET", path: "/api/products/top", token: tok, header: map[string]string{rhttp.RequestIDHeader: "top-1"}})

	require.Equal(t, stdhttp.StatusOK, rec.Code, rec.Body.String())
	assert.JSONEq(t, `{"period":"3days","products":[]}`, rec.Body.String())
	var failure map[string]any
	for _, line := range h.logs.lines(t) {
		if line["msg"] == "failed to query popular products; answering an empty list" {
			failure = line
		}
	}
	require.NotNil(t, failure, "the failed read is logged")
	assert.Equal(t, "top-1", failure["requestId"])
	assert.Equal(t, "ERROR", failure["level"])
	assert.Contains(t, failure["error"], "connection refused")
}
