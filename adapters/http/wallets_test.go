package http_test

import (
	stdhttp "net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A charge adds to the acting user's balance; an amount out of range is refused and changes
// nothing.
func TestCharge_AddsToTheBalanceAndRefusesAnAmountOutOfRange(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	token, user := h.userToken()
	h.create("/admin/users", `{"id":"`+user+`","balance":500}`)
	charge := func(amount, key string) call {
		return call{method: "POST", path: "/api/users/" + user + "/balance/charge", token: token,
			body: `{"amount":` + amount + `}`, idempotencyKey: key}
	}

	rec := h.do(charge("100", "k1"))
	require.Equal(t, stdhttp.StatusOK, rec.Code, rec.Body.String())
	assert.EqualValues(t, 600, answer(t, rec)["balance"])
	assert.EqualValues(t, 100, answer(t, rec)["chargedAmount"])

	assertError(t, h.do(charge("0", "k2")), stdhttp.StatusBadRequest, "INVALID_AMOUNT")
	balance := h.do(call{method: "GET", path: "/api/users/" + user + "/balance", token: token})
	require.Equal(t, stdhttp.StatusOK, balance.Code, balance.Body.String())
	assert.EqualValues(t, 600, answer(t, balance)["balance"])
}
