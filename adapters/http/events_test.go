package http_test

import (
	stdhttp "net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// In a pull event of one slot, the first user in is ready and the second waits behind; an event
// that does not exist is refused.
func TestPullEntry_ReadyThenWaitingAndUnknownEventRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	eventID := h.create("/admin/events", `{"name":"pull","seats":3,"slots":1,"mode":"pull"}`)["id"].(string)
	enter := func(eventID, token string) call {
		return call{method: "POST", path: "/events/" + eventID + "/queue", token: token}
	}
	first, _ := h.userToken()
	second, _ := h.userToken()

	rec := h.do(enter(eventID, first))
	require.Equal(t, stdhttp.StatusCreated, rec.Code, rec.Body.String())
	assert.Equal(t, "ready", answer(t, rec)["status"])
	rec = h.do(enter(eventID, second))
	require.Equal(t, stdhttp.StatusCreated, rec.Code, rec.Body.String())
	assert.Equal(t, "waiting", answer(t, rec)["status"])
	assert.EqualValues(t, 1, answer(t, rec)["rank"])

	assertError(t, h.do(enter(absentID, first)), stdhttp.StatusNotFound, "EVENT_NOT_FOUND")
}
