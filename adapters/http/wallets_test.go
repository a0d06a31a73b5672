package http_test

import (
	stdhttp "net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rhttp "github.com/rushgate/rushgate/adapters/http"
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

// A user id may hold any printable ASCII character, '/', '?', '#' and '%' included (the JWT sub
// is the user's id): the Location of a new user escapes it, so the URL leads to that user's
// balance and not to another path, query or fragment.
func TestCreateUser_LocationIsTheNewUsersBalanceWhateverTheID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	const user = "a/b?c#d%e"

	rec := h.do(call{method: "POST", path: "/admin/users", token: h.admin(), body: `{"id":"` + user + `","balance":7}`})
	require.Equal(t, stdhttp.StatusCreated, rec.Code, rec.Body.String())
	location := rec.Header().Get("Location")
	assert.Equal(t, "/api/users/a%2Fb%3Fc%23d%25e/balance", location)

	balance := h.do(call{method: "GET", path: location, token: h.token(user, rhttp.RoleUser)})
	require.Equal(t, stdhttp.StatusOK, balance.Code, balance.Body.String())
	assert.Equal(t, user, answer(t, balance)["userId"])
}
