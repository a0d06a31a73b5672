package http_test

import (
	stdhttp "net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The last coupon goes to the first user who asks; the next one hears it is sold out, and the
// first may not take a second.
func TestIssue_GivesTheLastCouponThenRefuses(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	expiresAt := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	couponID := h.create("/admin/coupons", `{"name":"10% off","discountRate":10,"totalQuantity":1,"expiresAt":"`+expiresAt+`"}`)["id"].(string)
	issue := func(token string) call {
		return call{method: "POST", path: "/api/coupons/" + couponID + "/issue", token: token}
	}
	first, _ := h.userToken()
	second, _ := h.userToken()

	rec := h.do(issue(first))
	require.Equal(t, stdhttp.StatusCreated, rec.Code, rec.Body.String())
	assert.EqualValues(t, 0, answer(t, rec)["remainingQuantity"])
	assert.NotEmpty(t, answer(t, rec)["userCouponId"])

	assertError(t, h.do(issue(second)), stdhttp.StatusConflict, "COUPON_SOLD_OUT")
	assertError(t, h.do(issue(first)), stdhttp.StatusConflict, "ALREADY_ISSUED")
}
