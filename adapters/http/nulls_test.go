package http_test

import (
	stdhttp "net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bodilessRoutes are the router's write routes that read no JSON body (the signed upload reads
// the image's bytes).
var bodilessRoutes = []string{"PUT /uploads/:key"}

// A body of null read as an object with no member: a crew join, an order or a queue entry
// (routes whose members are all optional) went ahead on it. Every JSON route refuses it.
func TestJSONBody_NullIsRefusedOnEveryRoute(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	walked := 0
	for _, r := range h.router.Routes() {
		route := r.Method + " " + r.Path
		if r.Method == stdhttp.MethodGet || slices.Contains(bodilessRoutes, route) {
			continue
		}
		walked++
		rec := h.do(call{method: r.Method, path: uuidPath(r.Path, "admin-1"), token: h.admin(),
			idempotencyKey: uuid.NewString(), body: " null\n"})
		body := assertError(t, rec, stdhttp.StatusBadRequest, "VALIDATION_FAILED")
		assert.Equal(t, "body", body.Field, route)
	}
	assert.GreaterOrEqual(t, walked, 19, "the router's JSON write routes when this test was written")
}

// A null member is that member absent: an optional one takes its default, and a required one
// is missing, 400 naming it.
func TestJSONBody_NullMemberIsAbsent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})

	event := h.create("/admin/events", `{"name":"gig","seats":3,"mode":"pull","slots":null,"tokenTtl":null,"opensAt":null,"prequeue":null}`)
	assert.EqualValues(t, 3, event["slots"])
	assert.Equal(t, "5m0s", event["tokenTtl"])
	assert.NotContains(t, event, "opensAt")
	raffle := h.create("/admin/raffles", `{"name":"draw","winners":1,"closesAt":"2099-01-01T00:00:00Z","productId":null}`)
	assert.NotContains(t, raffle, "productId")
	challenge := h.create("/admin/challenges", `{"title":"run","deadline":"2099-01-01T00:00:00Z","crewId":null}`)
	assert.Nil(t, challenge["crewId"])

	tok, _ := h.userToken()
	product := h.create("/admin/products", `{"name":"tea","price":500,"stock":10}`)
	rec := h.do(call{method: "POST", path: "/api/cart/items", token: tok,
		body: `{"userId":null,"productId":"` + product["id"].(string) + `","quantity":1}`})
	require.Equal(t, stdhttp.StatusCreated, rec.Code, rec.Body.String())
	order := h.do(call{method: "POST", path: "/api/orders", token: tok, body: `{"userId":null,"couponId":null}`})
	require.Equal(t, stdhttp.StatusCreated, order.Code, order.Body.String())
	assert.EqualValues(t, 0, answer(t, order)["discountAmount"])
	joined := h.do(call{method: "POST", path: "/crews/" + h.createCrew(3) + "/join", token: tok,
		idempotencyKey: "k1", body: `{"userId":null}`})
	require.Equal(t, stdhttp.StatusCreated, joined.Code, joined.Body.String())

	required := []struct{ path, body, field string }{
		{"/crews", `{"name":null,"maxMembers":3}`, "name"},
		{"/crews", `{"name":"runners","maxMembers":null}`, "maxMembers"},
		{"/admin/products", `{"name":"tea","price":null,"stock":1}`, "price"},
		{"/admin/products", `{"name":"tea","price":1,"stock":null}`, "stock"},
		{"/admin/users", `{"id":null,"balance":1}`, "id"},
		{"/admin/users", `{"id":"u-` + uuid.NewString() + `","balance":null}`, "balance"},
		{"/admin/events", `{"name":"gig","seats":null,"mode":"pull"}`, "seats"},
		{"/admin/events", `{"name":"gig","seats":3,"mode":null}`, "mode"},
		{"/admin/events/" + event["id"].(string), `{"slots":null}`, "slots"},
		{"/admin/coupons", `{"name":"c","discountRate":10,"totalQuantity":5,"expiresAt":null}`, "expiresAt"},
		{"/upload-sessions", `{"fileName":"a.png","contentType":"image/png","fileSize":null}`, "fileSize"},
		{"/api/cart/items", `{"productId":null,"quantity":1}`, "productId"},
		{"/api/cart/items", `{"productId":"` + product["id"].(string) + `","quantity":null}`, "quantity"},
	}
	for _, c := range required {
		method := "POST"
		if strings.HasPrefix(c.path, "/admin/events/") {
			method = "PATCH"
		}
		rec := h.do(call{method: method, path: c.path, token: h.admin(), body: c.body})
		body := assertError(t, rec, stdhttp.StatusBadRequest, "VALIDATION_FAILED")
		assert.Equal(t, c.field, body.Field, c.body)
	}
}

// uuidPath fills a gin path template: :userId with user, any other parameter with a fresh
// UUID, which every id check accepts.
func uuidPath(template, user string) string {
	segments := strings.Split(template, "/")
	for i, seg := range segments {
		switch {
		case seg == ":userId":
			segments[i] = user
		case strings.HasPrefix(seg, ":"):
			segments[i] = uuid.NewString()
		}
	}
	return strings.Join(segments, "/")
}
