package e2e

import (
	"net/http"
	"testing"
)

// TestCrew_EveryStatus walks every crew answer on every backend.
func TestCrew_EveryStatus(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b)
			crewID := s.createCrew(2)

			got := s.do("GET", "/crews/"+crewID, s.token("u1"), "")
			if got.status != http.StatusOK || got.num("maxMembers") != 2 || got.num("currentMembers") != 0 || got.str("name") != "e2e crew" {
				t.Fatalf("get: %d %s", got.status, got.raw)
			}

			joined := s.join(crewID, "u1", "k1")
			if joined.status != http.StatusCreated || joined.str("crewId") != crewID || joined.str("userId") != "u1" ||
				joined.num("currentMembers") != 1 || joined.num("maxMembers") != 2 || joined.str("joinedAt") == "" {
				t.Fatalf("join: %d %s", joined.status, joined.raw)
			}
			if joined.header.Get("Idempotent-Replayed") != "" {
				t.Fatal("first answer marked as replayed")
			}

			replay := s.join(crewID, "u1", "k1")
			if replay.status != http.StatusCreated || replay.header.Get("Idempotent-Replayed") != "true" || string(replay.raw) != string(joined.raw) {
				t.Fatalf("replay: %d %v %s", replay.status, replay.header, replay.raw)
			}

			assertError(t, s.join(crewID, "u1", "k2"), http.StatusConflict, "ALREADY_MEMBER")
			// The same key on another crew is another request.
			other := s.createCrew(1)
			assertError(t, s.join(other, "u1", "k1"), http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED")
			assertError(t, s.do("POST", "/crews/"+crewID+"/join", s.token("u2"), ""), http.StatusBadRequest, "IDEMPOTENCY_KEY_REQUIRED")

			if res := s.join(crewID, "u2", "k1"); res.status != http.StatusCreated {
				t.Fatalf("u2 with u1's key string (keys are per user): %d %s", res.status, res.raw)
			}
			full := s.join(crewID, "u3", "k1")
			assertError(t, full, http.StatusBadRequest, "CREW_FULL")
			// The rejected key was deleted: once a seat frees, the same key works.
			if res := s.do("DELETE", "/crews/"+crewID+"/members/me", s.token("u2"), ""); res.status != http.StatusNoContent {
				t.Fatalf("leave: %d %s", res.status, res.raw)
			}
			assertError(t, s.do("DELETE", "/crews/"+crewID+"/members/me", s.token("u2"), ""), http.StatusNotFound, "NOT_MEMBER")
			if res := s.join(crewID, "u3", "k1"); res.status != http.StatusCreated {
				t.Fatalf("retry after CREW_FULL with the same key: %d %s", res.status, res.raw)
			}

			assertError(t, s.join("0190a0b0-0000-7000-8000-000000000000", "u1", "k9"), http.StatusNotFound, "CREW_NOT_FOUND")
			assertError(t, s.do("GET", "/crews/0190a0b0-0000-7000-8000-000000000000", s.token("u1"), ""), http.StatusNotFound, "CREW_NOT_FOUND")

			page := s.do("GET", "/crews/"+crewID+"/members?limit=1", s.token("u1"), "")
			items, _ := page.body["items"].([]any)
			if page.status != http.StatusOK || len(items) != 1 || page.str("nextCursor") == "" {
				t.Fatalf("members page 1: %d %s", page.status, page.raw)
			}
			page2 := s.do("GET", "/crews/"+crewID+"/members?limit=1&cursor="+page.str("nextCursor"), s.token("u1"), "")
			items2, _ := page2.body["items"].([]any)
			if page2.status != http.StatusOK || len(items2) != 1 || page2.body["nextCursor"] != nil {
				t.Fatalf("members page 2: %d %s", page2.status, page2.raw)
			}

			if st := s.stored(crewID); st.currentMembers != 2 || st.members != 2 || st.distinctUsers != 2 {
				t.Fatalf("stored %+v", st)
			}
			if st := s.stored(other); st.currentMembers != 0 || st.members != 0 {
				t.Fatalf("other crew changed: %+v", st)
			}
		})
	}
}

func TestOperations_HealthReadinessMetricsOpenAPI(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b)
			for path, want := range map[string]string{
				"/healthz":      "ok",
				"/readyz":       "",
				"/metrics":      "rushgate_",
				"/openapi.yaml": "openapi: 3",
			} {
				req, _ := http.NewRequest("GET", s.url+path, nil)
				res, err := s.http.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body := readAll(t, res)
				if res.StatusCode != http.StatusOK || !contains(body, want) {
					t.Fatalf("%s: %d %.200s", path, res.StatusCode, body)
				}
			}
		})
	}
}
