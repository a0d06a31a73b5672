package http_test

import (
	"maps"
	stdhttp "net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pagedLists are the paged list routes of a fresh harness, each with a token it serves.
func pagedLists(t *testing.T, h *harness) map[string]string {
	t.Helper()
	tok, _ := h.userToken()
	event := h.create("/admin/events", `{"name":"gig","seats":3,"mode":"pull"}`)
	challenge := h.create("/admin/challenges", `{"title":"run","deadline":"2099-01-01T00:00:00Z"}`)
	return map[string]string{
		"/crews/" + h.createCrew(3) + "/members":                     tok,
		"/events/" + event["id"].(string) + "/seats":                 tok,
		"/challenges/" + challenge["id"].(string) + "/verifications": tok,
		"/admin/outbox": h.admin(),
	}
}

func TestPagedLists_TakeOnlyAPlainDecimalLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	bad := []string{
		"%2B5", // a leading plus, which strconv.Atoi takes
		"05", "007", "0",
		"+5", // a query's + is a space
		"%205", "5%20", "5.0", "1e2", "0x10", "-1", "501", "99999999999999999999", "",
	}
	for path, tok := range pagedLists(t, h) {
		good := h.do(call{method: "GET", path: path + "?limit=5", token: tok})
		require.Equal(t, stdhttp.StatusOK, good.Code, "%s: %s", path, good.Body.String())
		for _, limit := range bad {
			rec := h.do(call{method: "GET", path: path + "?limit=" + limit, token: tok})
			body := assertError(t, rec, stdhttp.StatusBadRequest, "VALIDATION_FAILED")
			assert.Equal(t, "limit", body.Field, "%s?limit=%s", path, limit)
		}
	}
}

// An empty cursor is refused: a client that turned the last page's null nextCursor into ""
// would otherwise be served the first page again, and loop.
func TestPagedLists_RefuseAnEmptyCursor(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	for path, tok := range pagedLists(t, h) {
		rec := h.do(call{method: "GET", path: path + "?cursor=", token: tok})
		body := assertError(t, rec, stdhttp.StatusBadRequest, "VALIDATION_FAILED")
		assert.Equal(t, "cursor", body.Field, path)
	}
}

func TestOutboxList_RefusesAnEmptyStatus(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})

	rec := h.do(call{method: "GET", path: "/admin/outbox?status=", token: h.admin()})

	body := assertError(t, rec, stdhttp.StatusBadRequest, "VALIDATION_FAILED")
	assert.Equal(t, "status", body.Field)
}

// A parameter given twice was answered with its first value, the other ignored. It is refused
// on every route, before authentication and before anything is written.
func TestQuery_AParameterGivenTwiceIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	tok, user := h.userToken()
	type refused struct {
		call
		field string // the parameter the answer names
	}
	calls := []refused{
		{call{method: "GET", path: "/admin/outbox?status=FAILED&status=SENT", token: h.admin()}, "status"},
		{call{method: "GET", path: "/api/cart?userId=" + user + "&userId=someone-else", token: tok}, "userId"},
		{call{method: "GET", path: "/healthz?probe=1&probe=2"}, "probe"},
		{call{method: "GET", path: "/events/" + uuid.NewString() + "/tickets/waiting?access_token=" + tok + "&access_token=" + tok}, "access_token"},
		{call{method: "PUT", path: "/uploads/some-key?expires=1&signature=a&expires=2"}, "expires"},
		// Several names repeated: always the same one, the first in name order.
		{call{method: "GET", path: "/healthz?b=1&a=1&b=2&a=2"}, "a"},
	}
	for path, tok := range pagedLists(t, h) {
		calls = append(calls,
			refused{call{method: "GET", path: path + "?limit=5&limit=50", token: tok}, "limit"},
			refused{call{method: "GET", path: path + "?cursor=a&cursor=b", token: tok}, "cursor"})
	}
	for _, c := range calls {
		rec := h.do(c.call)
		body := assertError(t, rec, stdhttp.StatusBadRequest, "VALIDATION_FAILED")
		assert.Equal(t, c.field, body.Field, c.path)
	}

	crewID := h.createCrew(3)
	rec := h.do(call{method: "POST", path: "/crews/" + crewID + "/join?via=a&via=b", token: tok, idempotencyKey: "k1"})
	assertError(t, rec, stdhttp.StatusBadRequest, "VALIDATION_FAILED")
	joined := h.join(crewID, tok, "k1")
	require.Equal(t, stdhttp.StatusCreated, joined.Code, "the refused request kept the key or the seat: %s", joined.Body.String())
	assert.EqualValues(t, 1, answer(t, joined)["currentMembers"])
}

// A query parameter the route does not take was ignored: ?limt=5, a typo of limit, was served
// as if no limit was given. Every route of openapi.yaml refuses one, naming it — any name, and
// each parameter the document gives another route only — and still takes each parameter it
// documents. The parameter is sent with no credentials: a 400 where an authenticated route
// answers 401 shows the refusal comes before authentication, so before any handler reads or
// writes. The waiting page, which people open from links others add parameters to, ignores
// them.
func TestQuery_AParameterTheRouteDoesNotTakeIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	doc, err := openapi3.NewLoader().LoadFromData(h.do(call{method: "GET", path: "/openapi.yaml"}).Body.Bytes())
	require.NoError(t, err)
	// A value each documented parameter takes, or at least reads rather than refuses unread.
	valueOf := map[string]string{"limit": "5", "cursor": "c", "status": "PENDING", "userId": "admin-1",
		"access_token": h.admin(), "expires": "1", "signature": "s"}
	const page = "GET /events/{eventId}/waiting-room"

	documentedOf := map[string]url.Values{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			route := method + " " + path
			documented := url.Values{}
			for _, p := range slices.Concat(item.Parameters, op.Parameters) {
				if p.Value.In == openapi3.ParameterInQuery {
					require.Contains(t, valueOf, p.Value.Name, "%s: a value for its parameter %s", route, p.Value.Name)
					documented.Set(p.Value.Name, valueOf[p.Value.Name])
				}
			}
			documentedOf[route] = documented
		}
	}
	require.Contains(t, documentedOf, page)
	require.GreaterOrEqual(t, len(documentedOf), 49, "the document's routes when this test was written")

	for route, documented := range documentedOf {
		method, path, _ := strings.Cut(route, " ")
		target := uuidPath(openAPIParam.ReplaceAllString(path, ":$1"), "admin-1")
		unknown := []string{"limt", "LIMIT", "x"}
		for name := range valueOf {
			if !documented.Has(name) {
				unknown = append(unknown, name)
			}
		}
		for _, name := range unknown {
			query := url.Values{name: {"5"}}
			maps.Copy(query, documented)
			rec := h.do(call{method: method, path: target + "?" + query.Encode()})
			if route == page {
				assert.Equal(t, stdhttp.StatusOK, rec.Code, "%s?%s: %s", route, query.Encode(), rec.Body.String())
				continue
			}
			body := assertError(t, rec, stdhttp.StatusBadRequest, "VALIDATION_FAILED")
			assert.Equal(t, name, body.Field, "%s?%s", route, query.Encode())
			assert.Contains(t, body.Message, "is not a parameter of this route", route)
		}
		for name, value := range documented {
			rec := h.do(call{method: method, path: target + "?" + url.Values{name: value}.Encode(), token: h.admin()})
			if rec.Code == stdhttp.StatusBadRequest {
				assert.NotContains(t, rec.Body.String(), "is not a parameter", "%s?%s", route, name)
			}
		}
	}
}

// A write refused for a parameter it does not take stores nothing and keeps no idempotency
// key; a path no route serves, or serves with another method, still answers 404 or 405.
func TestQuery_ARefusedParameterWritesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	tok, user := h.userToken()

	crews := h.crews.created.Load()
	rec := h.do(call{method: "POST", path: "/crews?maxMembers=3", token: h.admin(), body: `{"name":"runners","maxMembers":3}`})
	assert.Equal(t, "maxMembers", assertError(t, rec, stdhttp.StatusBadRequest, "VALIDATION_FAILED").Field)
	assert.Equal(t, crews, h.crews.created.Load(), "a refused creation stored a crew")

	crewID := h.createCrew(3)
	rec = h.do(call{method: "POST", path: "/crews/" + crewID + "/join?userId=" + user, token: tok, idempotencyKey: "k1"})
	assert.Equal(t, "userId", assertError(t, rec, stdhttp.StatusBadRequest, "VALIDATION_FAILED").Field)
	joined := h.join(crewID, tok, "k1")
	require.Equal(t, stdhttp.StatusCreated, joined.Code, "the refused request kept the key or the seat: %s", joined.Body.String())
	assert.EqualValues(t, 1, answer(t, joined)["currentMembers"])

	h.create("/admin/users", `{"id":"`+user+`","balance":100}`)
	charge := "/api/users/" + user + "/balance/charge"
	rec = h.do(call{method: "POST", path: charge + "?amount=5", token: tok, idempotencyKey: "k2", body: `{"amount":5}`})
	assert.Equal(t, "amount", assertError(t, rec, stdhttp.StatusBadRequest, "VALIDATION_FAILED").Field)
	charged := h.do(call{method: "POST", path: charge, token: tok, idempotencyKey: "k2", body: `{"amount":5}`})
	require.Equal(t, stdhttp.StatusOK, charged.Code, charged.Body.String())
	assert.EqualValues(t, 105, answer(t, charged)["balance"], "the refused charge was applied or kept its key")

	assertError(t, h.do(call{method: "GET", path: "/no-such-route?x=1"}), stdhttp.StatusNotFound, "NOT_FOUND")
	assertError(t, h.do(call{method: "PUT", path: "/crews?x=1"}), stdhttp.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
	// A pair with no name names no parameter the route takes either.
	assert.Equal(t, "query", assertError(t, h.do(call{method: "GET", path: "/healthz?=1"}), stdhttp.StatusBadRequest, "VALIDATION_FAILED").Field)
}
