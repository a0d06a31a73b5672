package e2e

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"
)

// TestInstantBounds_HeldByEveryBackend: the last instant every store holds is stored and read
// back as given on every backend (and, for a deadline, which may lie in the past, the first
// one); an instant beyond them, such as one RFC 3339's offsets move into the year 10000 in UTC, is
// 400 VALIDATION_FAILED naming the field, with nothing stored, where it was stored and then
// answered with an empty 500 (and refused by MySQL's driver with a 500).
func TestInstantBounds_HeldByEveryBackend(t *testing.T) {
	const (
		latest   = "9999-12-31T23:59:59.999999Z"
		earliest = "1000-01-01T00:00:00Z"
	)
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b)
			admin := s.adminToken()
			creates := []struct {
				path, field, body, table string
				readBack                 func(id string) response
				stored                   string // the instant read back for latest
			}{
				{"/admin/challenges", "deadline", `{"title":"t","deadline":%q}`, "challenges",
					func(id string) response { return s.do("GET", "/challenges/"+id, admin, "") }, latest},
				{"/admin/coupons", "expiresAt", `{"name":"c","discountRate":10,"totalQuantity":1,"expiresAt":%q}`, "coupons",
					func(id string) response { return s.do("POST", "/api/coupons/"+id+"/issue", s.token("holder"), "") }, latest},
				{"/admin/raffles", "closesAt", `{"name":"r","winners":1,"closesAt":%q}`, "raffles",
					func(id string) response { return s.do("GET", "/raffles/"+id, admin, "") }, latest},
				// A pre-queue keeps its opening to the millisecond.
				{"/admin/events", "opensAt", `{"name":"e","seats":1,"mode":"pull","opensAt":%q}`, "events",
					func(id string) response { return s.do("GET", "/events/"+id, admin, "") }, "9999-12-31T23:59:59.999Z"},
			}
			for _, c := range creates {
				created := s.do("POST", c.path, admin, fmt.Sprintf(c.body, latest))
				if created.status != http.StatusCreated {
					t.Fatalf("%s at %s: %d %s", c.field, latest, created.status, created.raw)
				}
				if read := c.readBack(created.str("id")); read.str(c.field) != c.stored {
					t.Errorf("%s at %s read back: %d %s", c.field, latest, read.status, read.raw)
				}
				for _, beyond := range []string{"9999-12-31T23:59:59-23:59", "9999-12-31T23:59:59.9999999Z"} {
					res := s.do("POST", c.path, admin, fmt.Sprintf(c.body, beyond))
					if res.status != http.StatusBadRequest || res.str("error") != "VALIDATION_FAILED" || res.str("field") != c.field {
						t.Errorf("%s at %s: want 400 VALIDATION_FAILED naming it, got %d %s", c.field, beyond, res.status, res.raw)
					}
				}
			}

			first := s.do("POST", "/admin/challenges", admin, fmt.Sprintf(`{"title":"t","deadline":%q}`, earliest))
			if read := s.do("GET", "/challenges/"+first.str("id"), admin, ""); read.str("deadline") != earliest {
				t.Errorf("deadline at %s: created %d %s, read back %d %s", earliest, first.status, first.raw, read.status, read.raw)
			}
			before := s.do("POST", "/admin/challenges", admin, `{"title":"t","deadline":"0999-12-31T23:59:59.999999Z"}`)
			if before.status != http.StatusBadRequest || before.str("field") != "deadline" {
				t.Errorf("deadline before the year 1000: want 400 naming it, got %d %s", before.status, before.raw)
			}

			if s.db == nil {
				return
			}
			for _, c := range creates {
				want := 1
				if c.table == "challenges" {
					want = 2
				}
				var n int
				if err := s.db.QueryRow("SELECT COUNT(*) FROM " + c.table).Scan(&n); err != nil || n != want {
					t.Errorf("%s: %d rows (%v), want %d: a refused instant was stored", c.table, n, err, want)
				}
			}
		})
	}
}

// TestMemberCursor_OutOfRangeInstantIsRefused: a member cursor is opaque, but a client can forge
// one; an instant in it that no store holds is the same 400 on every backend, not a 500 from
// MySQL's driver.
func TestMemberCursor_OutOfRangeInstantIsRefused(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b)
			crewID := s.createCrew(3)
			cursor := base64.RawURLEncoding.EncodeToString([]byte(`{"t":"9999-12-31T23:59:59-23:59","u":"someone"}`))

			res := s.do("GET", "/crews/"+crewID+"/members?cursor="+cursor, s.token("reader"), "")

			if res.status != http.StatusBadRequest || res.str("error") != "VALIDATION_FAILED" || res.str("field") != "cursor" {
				t.Fatalf("want 400 VALIDATION_FAILED naming cursor, got %d %s", res.status, res.raw)
			}
		})
	}
}
