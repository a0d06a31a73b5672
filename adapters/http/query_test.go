package http_test

import (
	stdhttp "net/http"
	"testing"

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
