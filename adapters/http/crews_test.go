package http_test

import (
	"context"
	"encoding/json"
	stdhttp "net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rhttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/ports"
)

func TestCreateCrew_ReturnsTheCrew(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})

	rec := h.do(call{method: "POST", path: "/crews", token: h.token("admin-1", rhttp.RoleAdmin),
		body: `{"name":"morning runners","maxMembers":3}`})

	require.Equal(t, stdhttp.StatusCreated, rec.Code, rec.Body.String())
	var view rhttp.CrewJSON
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &view))
	assert.Equal(t, "morning runners", view.Name)
	assert.Equal(t, 3, view.MaxMembers)
	assert.Equal(t, 0, view.CurrentMembers)
	assert.False(t, view.CreatedAt.IsZero())
	assert.Equal(t, "/crews/"+view.ID, rec.Header().Get("Location"))

	got := h.do(call{method: "GET", path: "/crews/" + view.ID, token: h.token("u1", rhttp.RoleUser)})
	require.Equal(t, stdhttp.StatusOK, got.Code, got.Body.String())
	assert.JSONEq(t, rec.Body.String(), got.Body.String())
}

func TestCreateCrew_RejectsInvalidBodies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body, field string
	}{
		{"malformed JSON", `{"name":"a",`, "body"},
		{"not JSON", `name=a`, "body"},
		{"empty body", ``, "body"},
		{"unknown field", `{"name":"a","maxMembers":3,"owner":"x"}`, "owner"},
		{"wrong type for maxMembers", `{"name":"a","maxMembers":"3"}`, "maxMembers"},
		{"fractional maxMembers", `{"name":"a","maxMembers":2.5}`, "maxMembers"},
		{"wrong type for name", `{"name":7,"maxMembers":3}`, "name"},
		{"trailing data", `{"name":"a","maxMembers":3} {"name":"b"}`, "body"},
		{"invalid UTF-8 in name", "{\"name\":\"a\xffb\",\"maxMembers\":3}", "name"},
		{"a name in another letter case", `{"NAME":"a","maxMembers":3}`, "NAME"},
		{"a name given twice", `{"name":"a","maxMembers":3,"maxMembers":5}`, "maxMembers"},
		{"array instead of object", `[{"name":"a","maxMembers":3}]`, "body"},
		{"missing name", `{"maxMembers":3}`, "name"},
		{"missing maxMembers", `{"name":"a"}`, "maxMembers"},
		{"maxMembers out of range", `{"name":"a","maxMembers":100001}`, "maxMembers"},
		{"name too long", `{"name":"` + strings.Repeat("n", 201) + `","maxMembers":3}`, "name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{})

			rec := h.do(call{method: "POST", path: "/crews", token: h.token("admin-1", rhttp.RoleAdmin), body: tc.body})

			body := assertError(t, rec, stdhttp.StatusBadRequest, "VALIDATION_FAILED")
			assert.Equal(t, tc.field, body.Field)
			assert.Zero(t, h.crews.created.Load(), "no crew may be created")
		})
	}
}

func TestCreateCrew_RejectsUserToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})

	rec := h.do(call{method: "POST", path: "/crews", token: h.token("u1", rhttp.RoleUser),
		body: `{"name":"a","maxMembers":3}`})

	assertError(t, rec, stdhttp.StatusForbidden, "FORBIDDEN")
	assert.Zero(t, h.crews.created.Load())
}

func TestGetCrew_RejectsUnknownAndMalformedIDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	tok, _ := h.userToken()

	unknown := h.do(call{method: "GET", path: "/crews/" + uuid.NewString(), token: tok})
	assertError(t, unknown, stdhttp.StatusNotFound, "CREW_NOT_FOUND")

	malformed := h.do(call{method: "GET", path: "/crews/not-a-uuid", token: tok})
	body := assertError(t, malformed, stdhttp.StatusBadRequest, "VALIDATION_FAILED")
	assert.Equal(t, "crewId", body.Field)
}

func TestJoin_SeatsTheUser(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(2)
	tok, user := h.userToken()

	rec := h.join(crewID, tok, "k-"+uuid.NewString())

	require.Equal(t, stdhttp.StatusCreated, rec.Code, rec.Body.String())
	assert.Empty(t, rec.Header().Get("Idempotent-Replayed"))
	var res rhttp.JoinJSON
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &res))
	assert.Equal(t, crewID, res.CrewID)
	assert.Equal(t, user, res.UserID)
	assert.Equal(t, 1, res.CurrentMembers)
	assert.Equal(t, 2, res.MaxMembers)
	assert.False(t, res.JoinedAt.IsZero())
	h.assertSeats(crewID, 1)
}

func TestJoin_AcceptsAnEmptyObjectOrTheUsersOwnID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(2)
	tokA, _ := h.userToken()
	tokB, userB := h.userToken()

	a := h.do(call{method: "POST", path: "/crews/" + crewID + "/join", token: tokA, idempotencyKey: "k1", body: `{}`})
	require.Equal(t, stdhttp.StatusCreated, a.Code, a.Body.String())
	b := h.do(call{method: "POST", path: "/crews/" + crewID + "/join", token: tokB, idempotencyKey: "k1",
		body: `{"userId":"` + userB + `"}`})
	require.Equal(t, stdhttp.StatusCreated, b.Code, b.Body.String())
	h.assertSeats(crewID, 2)
}

func TestJoin_RejectsAnotherUsersID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(2)
	tok, _ := h.userToken()

	rec := h.do(call{method: "POST", path: "/crews/" + crewID + "/join", token: tok, idempotencyKey: "k1",
		body: `{"userId":"someone-else"}`})

	assertError(t, rec, stdhttp.StatusForbidden, "FORBIDDEN")
	h.assertSeats(crewID, 0)
}

func TestJoin_RejectsInvalidRequests(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, crewID, key, body string
		code, field             string
	}{
		{"missing key", "", "", "", "IDEMPOTENCY_KEY_REQUIRED", ""},
		{"key too long", "", strings.Repeat("k", guard.MaxKeyLength+1), "", "VALIDATION_FAILED", "Idempotency-Key"},
		{"key with a control character", "", "key\twith-tab", "", "VALIDATION_FAILED", "Idempotency-Key"},
		{"key with non-ASCII", "", "clé", "", "VALIDATION_FAILED", "Idempotency-Key"},
		{"malformed JSON", "", "k1", `{"userId":`, "VALIDATION_FAILED", "body"},
		{"a vertical tab, not JSON whitespace", "", "k1", "\v", "VALIDATION_FAILED", "body"},
		{"a no-break space, not JSON whitespace", "", "k1", "\u00a0", "VALIDATION_FAILED", "body"},
		{"unknown field", "", "k1", `{"seat":3}`, "VALIDATION_FAILED", "seat"},
		{"wrong type", "", "k1", `{"userId":42}`, "VALIDATION_FAILED", "userId"},
		{"bad crew id", "NOT-A-UUID", "k1", "", "VALIDATION_FAILED", "crewId"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{})
			crewID := h.createCrew(2)
			target := crewID
			if tc.crewID != "" {
				target = tc.crewID
			}
			tok, _ := h.userToken()

			rec := h.do(call{method: "POST", path: "/crews/" + target + "/join", token: tok,
				idempotencyKey: tc.key, body: tc.body})

			body := assertError(t, rec, stdhttp.StatusBadRequest, tc.code)
			assert.Equal(t, tc.field, body.Field)
			h.assertSeats(crewID, 0)
		})
	}
}

func TestJoin_UnknownCrewIsNotFound(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	tok, _ := h.userToken()
	key := "k-" + uuid.NewString()

	rec := h.join(uuid.NewString(), tok, key)

	assertError(t, rec, stdhttp.StatusNotFound, "CREW_NOT_FOUND")
}

func TestJoin_FullCrewIsRejectedAndTheKeyFreed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(1)
	first, _ := h.userToken()
	second, _ := h.userToken()
	require.Equal(t, stdhttp.StatusCreated, h.join(crewID, first, "k1").Code)

	rec := h.join(crewID, second, "k2")

	assertError(t, rec, stdhttp.StatusBadRequest, "CREW_FULL")
	h.assertSeats(crewID, 1)

	// Leaving frees the seat, and the rejected key was deleted, so the same retry now succeeds.
	leave := h.do(call{method: "DELETE", path: "/crews/" + crewID + "/members/me", token: first})
	require.Equal(t, stdhttp.StatusNoContent, leave.Code, leave.Body.String())
	assert.Empty(t, leave.Body.String())
	h.assertSeats(crewID, 0)

	retry := h.join(crewID, second, "k2")
	require.Equal(t, stdhttp.StatusCreated, retry.Code, retry.Body.String())
	assert.Empty(t, retry.Header().Get("Idempotent-Replayed"))
	h.assertSeats(crewID, 1)
}

func TestJoin_AlreadyMemberIsConflict(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(3)
	tok, _ := h.userToken()
	require.Equal(t, stdhttp.StatusCreated, h.join(crewID, tok, "k1").Code)

	rec := h.join(crewID, tok, "k2")

	assertError(t, rec, stdhttp.StatusConflict, "ALREADY_MEMBER")
	h.assertSeats(crewID, 1)
}

func TestJoin_ReplaysACompletedKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(3)
	tok, _ := h.userToken()
	first := h.join(crewID, tok, "k1")
	require.Equal(t, stdhttp.StatusCreated, first.Code)

	replay := h.join(crewID, tok, "k1")

	require.Equal(t, stdhttp.StatusCreated, replay.Code, replay.Body.String())
	assert.Equal(t, "true", replay.Header().Get("Idempotent-Replayed"))
	assert.JSONEq(t, first.Body.String(), replay.Body.String())
	h.assertSeats(crewID, 1)
	assert.Contains(t, h.scrape(), "rushgate_idempotency_replays_total 1\n")
}

func TestJoin_KeyInProgressIsConflict(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(3)
	tok, user := h.userToken()
	// Another request of the same user holds the key and is still running.
	fingerprint := guard.Fingerprint("crew.join", []string{crewID}, nil)
	begun, err := h.store.Begin(context.Background(), ports.IdempotencyKey{Scope: user, Key: "k1"},
		fingerprint, time.Minute, time.Hour)
	require.NoError(t, err)
	require.Equal(t, ports.BeginStarted, begun.State)

	rec := h.join(crewID, tok, "k1")

	assertError(t, rec, stdhttp.StatusConflict, "IDEMPOTENCY_IN_PROGRESS")
	h.assertSeats(crewID, 0)
}

func TestJoin_KeyReusedForAnotherCrewIsUnprocessable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewA := h.createCrew(3)
	crewB := h.createCrew(3)
	tok, _ := h.userToken()
	require.Equal(t, stdhttp.StatusCreated, h.join(crewA, tok, "k1").Code)

	rec := h.join(crewB, tok, "k1")

	assertError(t, rec, stdhttp.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED")
	h.assertSeats(crewA, 1)
	h.assertSeats(crewB, 0)
}

func TestJoin_KeysAreScopedPerUser(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(3)
	tokA, _ := h.userToken()
	tokB, userB := h.userToken()
	require.Equal(t, stdhttp.StatusCreated, h.join(crewID, tokA, "shared").Code)

	rec := h.join(crewID, tokB, "shared")

	require.Equal(t, stdhttp.StatusCreated, rec.Code, rec.Body.String())
	assert.Empty(t, rec.Header().Get("Idempotent-Replayed"))
	assert.Contains(t, rec.Body.String(), userB)
	h.assertSeats(crewID, 2)
}

func TestJoin_BusyLockIsTooManyRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(3)
	tok, _ := h.userToken()
	held, err := h.locker.TryAcquire(context.Background(), "crew:"+crewID, time.Minute)
	require.NoError(t, err)

	rec := h.join(crewID, tok, "k1")

	assertError(t, rec, stdhttp.StatusTooManyRequests, "TOO_MANY_REQUESTS")
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	h.assertSeats(crewID, 0)
	assert.Contains(t, h.scrape(), `rushgate_lock_exhausted_total{lock="crew"} 1`)

	// The key was deleted, so the same request succeeds once the lock is free.
	require.NoError(t, held.Release(context.Background()))
	retry := h.join(crewID, tok, "k1")
	require.Equal(t, stdhttp.StatusCreated, retry.Code, retry.Body.String())
	h.assertSeats(crewID, 1)
}

func TestLeave_NotAMemberIsNotFound(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(3)
	member, _ := h.userToken()
	stranger, _ := h.userToken()
	require.Equal(t, stdhttp.StatusCreated, h.join(crewID, member, "k1").Code)

	rec := h.do(call{method: "DELETE", path: "/crews/" + crewID + "/members/me", token: stranger})

	assertError(t, rec, stdhttp.StatusNotFound, "NOT_MEMBER")
	h.assertSeats(crewID, 1)

	unknown := h.do(call{method: "DELETE", path: "/crews/" + uuid.NewString() + "/members/me", token: member})
	assertError(t, unknown, stdhttp.StatusNotFound, "CREW_NOT_FOUND")
}

func TestListMembers_PagesInJoinOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(5)
	var users []string
	for range 3 {
		tok, user := h.userToken()
		require.Equal(t, stdhttp.StatusCreated, h.join(crewID, tok, "k1").Code)
		users = append(users, user)
	}
	tok, _ := h.userToken()
	path := "/crews/" + crewID + "/members"

	first := h.do(call{method: "GET", path: path + "?limit=2", token: tok})
	require.Equal(t, stdhttp.StatusOK, first.Code, first.Body.String())
	var page1 rhttp.MemberPageJSON
	require.NoError(t, json.Unmarshal(first.Body.Bytes(), &page1))
	require.Len(t, page1.Items, 2)
	require.NotNil(t, page1.NextCursor)

	second := h.do(call{method: "GET", path: path + "?limit=2&cursor=" + *page1.NextCursor, token: tok})
	require.Equal(t, stdhttp.StatusOK, second.Code, second.Body.String())
	var page2 rhttp.MemberPageJSON
	require.NoError(t, json.Unmarshal(second.Body.Bytes(), &page2))
	require.Len(t, page2.Items, 1)
	assert.Contains(t, second.Body.String(), `"nextCursor":null`)

	got := []string{page1.Items[0].UserID, page1.Items[1].UserID, page2.Items[0].UserID}
	assert.Equal(t, users, got)

	all := h.do(call{method: "GET", path: path, token: tok})
	require.Equal(t, stdhttp.StatusOK, all.Code)
	var page rhttp.MemberPageJSON
	require.NoError(t, json.Unmarshal(all.Body.Bytes(), &page))
	assert.Len(t, page.Items, 3)
	assert.Nil(t, page.NextCursor)
}

func TestListMembers_RejectsBadQueries(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, query, field string
	}{
		{"non-integer limit", "?limit=ten", "limit"},
		{"empty limit", "?limit=", "limit"},
		{"zero limit", "?limit=0", "limit"},
		{"negative limit", "?limit=-1", "limit"},
		{"limit above the maximum", "?limit=501", "limit"},
		{"cursor not issued by the server", "?cursor=bm90LWEtY3Vyc29y", "cursor"},
		{"cursor not base64", "?cursor=***", "cursor"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{})
			crewID := h.createCrew(3)
			tok, _ := h.userToken()

			rec := h.do(call{method: "GET", path: "/crews/" + crewID + "/members" + tc.query, token: tok})

			body := assertError(t, rec, stdhttp.StatusBadRequest, "VALIDATION_FAILED")
			assert.Equal(t, tc.field, body.Field)
		})
	}
}

func TestListMembers_UnknownCrewIsNotFound(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	tok, _ := h.userToken()

	rec := h.do(call{method: "GET", path: "/crews/" + uuid.NewString() + "/members", token: tok})

	assertError(t, rec, stdhttp.StatusNotFound, "CREW_NOT_FOUND")
}

// TestAnswers_KeepHTMLCharactersAsTheyAre: an answer writes &, < and > as themselves, not as
// \u0026 and the like, so a presigned URL or a name reads the same to a shell as to a JSON client.
func TestAnswers_KeepHTMLCharactersAsTheyAre(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	rec := h.do(call{method: "POST", path: "/crews", token: h.token("admin-1", rhttp.RoleAdmin),
		body: `{"name":"R&D <runners>","maxMembers":5}`})
	require.Equal(t, stdhttp.StatusCreated, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), `"name":"R&D <runners>"`)
	assert.NotContains(t, rec.Body.String(), `\u0026`)
}
