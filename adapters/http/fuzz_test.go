package http_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	rhttp "github.com/rushgate/rushgate/adapters/http"
)

// fuzzRoutes are the operations FuzzRouter aims at; the id, query, body, key and token vary.
var fuzzRoutes = []struct {
	method, path string // "{id}" stands for a crew id
	admin        bool
}{
	{"POST", "/crews", true},
	{"GET", "/crews/{id}", false},
	{"GET", "/crews/{id}/members", false},
	{"POST", "/crews/{id}/join", false},
	{"DELETE", "/crews/{id}/members/me", false},
}

// FuzzRouter sends arbitrary ids, query strings, bodies, idempotency keys and tokens to every
// crew route. Whatever arrives, the answer is never a 500, every error is the JSON shape
// every route answers, and the crew's invariant holds afterwards. `go test -fuzz FuzzRouter
// ./adapters/http/` explores further; the seeds below run with every `make test`.
func FuzzRouter(f *testing.F) {
	seeds := []struct {
		route                      byte
		realCrew                   bool
		id, query, body, key, auth string
	}{
		{0, false, "", "", `{"name":"a\u0000b","maxMembers":3}`, "", "good"},
		{0, false, "", "", `{"name":"runners","maxMembers":1e400}`, "", "good"},
		{0, false, "", "", `{"name":"runners","maxMembers":3}{}`, "", "good"},
		{0, false, "", "", `{"NAME":"x","maxMembers":3,"extra":1}`, "", "good"},
		{1, false, "not-a-uuid", "", "", "", "good"},
		{1, false, "a/b", "", "", "", "good"},
		{2, true, "", "limit=0&cursor=%00", "", "", "good"},
		{2, true, "", "limit=9999999999999999999&cursor=eyJ0IjoiMjAyNiIsInUiOiJcdTAwMDAifQ", "", "", "good"},
		{2, true, "", "cursor=;;;&limit=%zz", "", "", "good"},
		{3, true, "", "", `{"userId":"someone-else"}`, "k1", "good"},
		{3, true, "", "", ``, "k\x01", "good"},
		{3, true, "", "", `[]`, strings.Repeat("k", 300), "good"},
		{3, true, "", "", ``, "k2", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0."},
		{4, true, "", "", ``, "", ""},
	}
	for _, s := range seeds {
		f.Add(s.route, s.realCrew, s.id, s.query, s.body, s.key, s.auth)
	}
	f.Fuzz(func(t *testing.T, route byte, realCrew bool, id, query, body, key, auth string) {
		h := newHarness(t, harnessConfig{})
		crewID := h.createCrew(2)
		target := fuzzRoutes[int(route)%len(fuzzRoutes)]
		if realCrew {
			id = crewID
		}
		path := strings.ReplaceAll(target.path, "{id}", id)
		req := httptest.NewRequest(target.method, "/", strings.NewReader(body))
		req.URL.Path, req.URL.RawPath = path, strings.ReplaceAll(target.path, "{id}", url.PathEscape(id))
		req.URL.RawQuery = query
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		switch auth {
		case "good":
			role := rhttp.RoleUser
			if target.admin {
				role = rhttp.RoleAdmin
			}
			req.Header.Set("Authorization", "Bearer "+h.token("fuzz-user", role))
		case "":
		default:
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		if key != "" && !strings.ContainsAny(key, "\r\n\x00") {
			req.Header.Set("Idempotency-Key", key)
		}
		rec := httptest.NewRecorder()
		h.router.ServeHTTP(rec, req)

		if rec.Code >= 500 {
			t.Fatalf("%s %s?%s answered %d: %s", target.method, req.URL.RawPath, query, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var e errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" || e.Message == "" {
				t.Fatalf("%s %s answered %d without a JSON error: %q", target.method, req.URL.RawPath, rec.Code, rec.Body)
			}
		}
		c, err := h.crews.Get(context.Background(), crewID)
		if err != nil {
			t.Fatal(err)
		}
		members, err := h.members.Count(context.Background(), crewID)
		if err != nil {
			t.Fatal(err)
		}
		if c.CurrentMembers() != members || members > c.MaxMembers() {
			t.Fatalf("invariant broken: count %d, members %d, max %d", c.CurrentMembers(), members, c.MaxMembers())
		}
	})
}
