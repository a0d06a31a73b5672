package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHardening_TextReachingStorageIsValidatedAlike sends text no database stores the same way
// (NUL, control characters, invalid UTF-8, over-long) everywhere it can reach storage, and
// expects the same 400 VALIDATION_FAILED naming the field on every backend, and nothing
// stored.
func TestHardening_TextReachingStorageIsValidatedAlike(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b)
			crewID := s.createCrew(5)
			user := s.token("reader")
			members := "/crews/" + crewID + "/members"
			cursor := func(body string) string { return base64.RawURLEncoding.EncodeToString([]byte(body)) }

			cases := []struct {
				name, method, path, body, field string
			}{
				{"NUL in a crew name", "POST", "/crews", `{"name":"a\u0000b","maxMembers":3}`, "name"},
				{"newline in a crew name", "POST", "/crews", `{"name":"a\nb","maxMembers":3}`, "name"},
				{"C1 control in a crew name", "POST", "/crews", `{"name":"a\u0085b","maxMembers":3}`, "name"},
				{"DEL in a crew name", "POST", "/crews", `{"name":"a\u007fb","maxMembers":3}`, "name"},
				{"crew name over 200 characters", "POST", "/crews", `{"name":"` + strings.Repeat("é", 201) + `","maxMembers":3}`, "name"},
				{"NUL in a cursor's user id", "GET", members + "?cursor=" + cursor(`{"t":"2026-11-21T09:00:00Z","u":"a\u0000b"}`), "", "cursor"},
				{"tab in a cursor's user id", "GET", members + "?cursor=" + cursor(`{"t":"2026-11-21T09:00:00Z","u":"a\tb"}`), "", "cursor"},
				{"over-long cursor user id", "GET", members + "?cursor=" + cursor(`{"t":"2026-11-21T09:00:00Z","u":"`+strings.Repeat("u", 65)+`"}`), "", "cursor"},
				{"NUL as a crew id", "GET", "/crews/%00", "", "crewId"},
				{"NUL in a crew id being joined", "POST", "/crews/" + crewID[:35] + "%00/join", "", "crewId"},
				{"invalid UTF-8 in a crew id", "GET", "/crews/%FF", "", "crewId"},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					token := user
					if tc.path == "/crews" {
						token = s.adminToken()
					}
					res := s.do(tc.method, tc.path, token, tc.body, "Idempotency-Key", s.run+tc.name)

					assertError(t, res, http.StatusBadRequest, "VALIDATION_FAILED")
					if got := res.str("field"); got != tc.field {
						t.Fatalf("field %q, want %q", got, tc.field)
					}
				})
			}

			// What is valid passes on every backend alike, four-byte characters included.
			named := s.do("POST", "/crews", s.adminToken(), `{"name":"🏃 `+strings.Repeat("é", 198)+`","maxMembers":3}`)
			if named.status != http.StatusCreated {
				t.Fatalf("a valid 200-character name: %d %s", named.status, named.raw)
			}
			if st := s.stored(crewID); st.currentMembers != 0 || st.members != 0 {
				t.Fatalf("bad input changed the crew: %+v", st)
			}
			if s.db != nil {
				var crews int
				if err := s.db.QueryRow("SELECT COUNT(*) FROM crews").Scan(&crews); err != nil || crews != 2 {
					t.Fatalf("crews stored: %d (%v), want the two valid ones", crews, err)
				}
			}
		})
	}
}

// answer is one response received off the test's goroutine, where s.do cannot fail the test.
type answer struct {
	status     int
	code       string
	retryAfter string
	sent, at   time.Time
	err        error
}

// joinFromAnyGoroutine sends a join like s.join, safe to call from any goroutine.
func (s *server) joinFromAnyGoroutine(crewID, user, key string) answer {
	return s.postFromAnyGoroutine("/crews/"+crewID+"/join", user, "", key)
}

// postFromAnyGoroutine sends a POST of body (none when empty) as user, with the Idempotency-Key
// s.run+key unless key is empty and the headers given as name, value pairs, safe to call from
// any goroutine.
func (s *server) postFromAnyGoroutine(path, user, body, key string, header ...string) answer {
	sent := time.Now()
	req, err := http.NewRequest("POST", s.url+path, strings.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", s.run+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return s.answerFromAnyGoroutine(req, user, sent)
}

// getFromAnyGoroutine sends a GET as user, safe to call from any goroutine.
func (s *server) getFromAnyGoroutine(path, user string) answer {
	sent := time.Now()
	req, err := http.NewRequest("GET", s.url+path, nil)
	if err != nil {
		return answer{err: err}
	}
	return s.answerFromAnyGoroutine(req, user, sent)
}

// answerFromAnyGoroutine sends req as user and reads its status, error code and Retry-After.
func (s *server) answerFromAnyGoroutine(req *http.Request, user string, sent time.Time) answer {
	a := answer{sent: sent}
	req.Header.Set("Authorization", "Bearer "+s.token(user))
	res, err := s.http.Do(req)
	a.at = time.Now()
	if err != nil {
		a.err = err
		return a
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		a.err = err
		return a
	}
	var decoded struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(raw, &decoded)
	a.status, a.code, a.retryAfter = res.StatusCode, decoded.Error, res.Header.Get("Retry-After")
	return a
}

// String names the answer in failure messages.
func (a answer) String() string {
	if a.err != nil {
		return "transport error: " + a.err.Error()
	}
	return fmt.Sprintf("%d %s after %v", a.status, a.code, a.at.Sub(a.sent).Round(time.Millisecond))
}
