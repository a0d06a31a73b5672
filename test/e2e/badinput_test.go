package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/bootstrap"
)

// TestBadInput_AnswersErrorJSONAndChangesNothing sends every kind of bad request at a real
// server and checks the database afterwards.
func TestBadInput_AnswersErrorJSONAndChangesNothing(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b, func(c *bootstrap.Config) { c.Server.MaxBodyBytes = 4096 })
			crewID := s.createCrew(5)
			user := s.token("victim")
			expired, _ := s.tokens.Mint("victim", rghttp.RoleUser, -time.Minute)
			forged, _ := rghttp.NewTokens([]byte(strings.Repeat("x", 40))).Mint("victim", rghttp.RoleAdmin, time.Hour)
			join := "/crews/" + crewID + "/join"

			cases := []struct {
				name, method, path, token, body string
				headers                         []string
				status                          int
				code                            string
			}{
				{"malformed JSON", "POST", "/crews", s.adminToken(), `{"name":`, nil, 400, "VALIDATION_FAILED"},
				{"unknown field", "POST", "/crews", s.adminToken(), `{"name":"a","maxMembers":3,"owner":"x"}`, nil, 400, "VALIDATION_FAILED"},
				{"wrong type", "POST", "/crews", s.adminToken(), `{"name":"a","maxMembers":"3"}`, nil, 400, "VALIDATION_FAILED"},
				{"out of range", "POST", "/crews", s.adminToken(), `{"name":"a","maxMembers":100001}`, nil, 400, "VALIDATION_FAILED"},
				{"huge body", "POST", "/crews", s.adminToken(), `{"name":"` + strings.Repeat("a", 10000) + `","maxMembers":3}`, nil, 413, "PAYLOAD_TOO_LARGE"},
				{"user creates crew", "POST", "/crews", user, `{"name":"a","maxMembers":3}`, nil, 403, "FORBIDDEN"},
				{"bad crew id", "POST", "/crews/not-a-uuid/join", user, "", []string{"Idempotency-Key", s.run + "bad-id"}, 400, "VALIDATION_FAILED"},
				{"missing token", "POST", join, "", "", []string{"Idempotency-Key", s.run + "k"}, 401, "UNAUTHORIZED"},
				{"expired token", "POST", join, expired, "", []string{"Idempotency-Key", s.run + "k"}, 401, "UNAUTHORIZED"},
				{"forged token", "POST", join, forged, "", []string{"Idempotency-Key", s.run + "k"}, 401, "UNAUTHORIZED"},
				{"another user's id", "POST", join, user, `{"userId":"someone-else"}`, []string{"Idempotency-Key", s.run + "other"}, 403, "FORBIDDEN"},
				{"unknown field on join", "POST", join, user, `{"seat":1}`, []string{"Idempotency-Key", s.run + "field"}, 400, "VALIDATION_FAILED"},
				{"bad limit", "GET", "/crews/" + crewID + "/members?limit=many", user, "", nil, 400, "VALIDATION_FAILED"},
				{"bad cursor", "GET", "/crews/" + crewID + "/members?cursor=bm90LWEtY3Vyc29y", user, "", nil, 400, "VALIDATION_FAILED"},
			}
			for _, tc := range cases {
				res := s.do(tc.method, tc.path, tc.token, tc.body, tc.headers...)
				if res.status != tc.status || res.str("error") != tc.code || res.str("message") == "" {
					t.Errorf("%s: want %d %s, got %d %s", tc.name, tc.status, tc.code, res.status, res.raw)
				}
			}

			if st := s.stored(crewID); st.currentMembers != 0 || st.members != 0 {
				t.Fatalf("bad input changed the crew: %+v", st)
			}
			if s.db != nil {
				var crews int
				if err := s.db.QueryRow("SELECT COUNT(*) FROM crews").Scan(&crews); err != nil || crews != 1 {
					t.Fatalf("bad input created crews: %d, %v", crews, err)
				}
			}
			// The keys of rejected requests were not kept: the same key works for a good request.
			if res := s.do("POST", join, user, "", "Idempotency-Key", s.run+"other"); res.status != http.StatusCreated {
				t.Fatalf("good request after bad ones: %d %s", res.status, res.raw)
			}
		})
	}
}
