package e2e

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"
)

// badJSON is one body strict JSON refuses whatever the route: body writes the route's field p
// with value (a JSON value) after the members others (each followed by a comma), and the answer
// must name want(p) with a message containing says.
type badJSON struct {
	name string
	body func(p, value, others string) string
	want func(p string) string
	says string
}

// badJSONBodies are the bodies encoding/json used to accept: invalid UTF-8 in a string (stored
// as U+FFFD), a field name in another letter case (matched anyway), a name given twice (the
// last one won), and, refused before too, text after the value.
var badJSONBodies = []badJSON{
	{"invalid UTF-8 in a string", func(p, _, others string) string {
		return `{` + others + `"` + p + "\":\"a\xffb\"}"
	}, same, "UTF-8"},
	{"a field name in another letter case", func(p, value, others string) string {
		return `{` + others + `"` + strings.ToUpper(p) + `":` + value + `}`
	}, strings.ToUpper, "not a known field"},
	{"a field name given twice", func(p, value, others string) string {
		return `{` + others + `"` + p + `":` + value + `,"` + p + `":` + value + `}`
	}, same, "more than once"},
	{"text after the value", func(_, _, others string) string {
		return `{` + strings.TrimSuffix(others, ",") + `} x`
	}, func(string) string { return "body" }, "after top-level value"},
}

func same(p string) string { return p }

// bodilessRoutes are the write routes that read no JSON body at all (the signed upload reads
// the image's bytes); every other write route reads JSON, or refuses any but {}, and is walked.
var bodilessRoutes = []string{
	"PUT /uploads/{key}",
}

// TestStrictJSON_EveryJSONRouteRefusesWhatEncodingJSONAccepted walks every write route of
// openapi.yaml — which TestOpenAPI_DocumentMatchesTheRouter holds equal to the router's, so a
// new route is walked without editing this test — with each bad body, and requires 400
// VALIDATION_FAILED naming the field the body is wrong about. A route documenting a JSON body
// is sent its first documented field, so a refusal for any other reason (a missing field, a bad
// path id) fails the test; a route documenting none must refuse any member (it takes {} or
// nothing).
func TestStrictJSON_EveryJSONRouteRefusesWhatEncodingJSONAccepted(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromFile("../../adapters/http/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, testBackends[0]) // the decoder runs before any storage: memory shows it
	admin := s.adminToken()              // every route lets an admin through to its body
	walked := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			route := method + " " + path
			if method == http.MethodGet || slices.Contains(bodilessRoutes, route) {
				continue
			}
			field, documented := firstJSONField(op)
			if !documented {
				field = "x"
			}
			target := concreteURL(path, "admin")
			walked++
			for _, bad := range badJSONBodies {
				t.Run(route+"/"+bad.name, func(t *testing.T) {
					res := s.do(method, target, admin, bad.body(field, "null", ""), "Idempotency-Key", s.run+uuid.NewString())
					assertError(t, res, http.StatusBadRequest, "VALIDATION_FAILED")
					if got := res.str("field"); got != bad.want(field) {
						t.Fatalf("field %q (%s), want %q", got, res.str("message"), bad.want(field))
					}
					if documented && !strings.Contains(res.str("message"), bad.says) {
						t.Fatalf("message %q does not say %q", res.str("message"), bad.says)
					}
				})
			}
		}
	}
	if walked < 19 { // the document's JSON routes when this test was written
		t.Fatalf("walked %d JSON routes; openapi.yaml documents at least 19", walked)
	}
}

// firstJSONField is the first string field, in name order, of the operation's JSON body (the
// first field when none is a string: invalid UTF-8 is refused in any JSON string), if it
// documents one.
func firstJSONField(op *openapi3.Operation) (string, bool) {
	if op.RequestBody == nil || op.RequestBody.Value == nil {
		return "", false
	}
	media := op.RequestBody.Value.Content.Get("application/json")
	if media == nil || media.Schema == nil || len(media.Schema.Value.Properties) == 0 {
		return "", false
	}
	names := make([]string, 0, len(media.Schema.Value.Properties))
	for name := range media.Schema.Value.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if media.Schema.Value.Properties[name].Value.Type.Is(openapi3.TypeString) {
			return name, true
		}
	}
	return names[0], true
}

// concreteURL fills a path template: {userId} with user, any other parameter with a fresh
// UUID, which every id check accepts.
func concreteURL(template, user string) string {
	segments := strings.Split(template, "/")
	for i, seg := range segments {
		switch {
		case seg == "{userId}":
			segments[i] = user
		case strings.HasPrefix(seg, "{"):
			segments[i] = uuid.NewString()
		}
	}
	return strings.Join(segments, "/")
}

// TestStrictJSON_RefusedWritesChangeNothing sends the bad bodies to a charge, a crew join, a
// crew creation and a product creation on every backend, then checks that the balance and the
// crew are unchanged and, where the test can count rows, that no crew or product was stored;
// the idempotency key a refused charge carried still works for a good one.
func TestStrictJSON_RefusedWritesChangeNothing(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b)
			user := "strict-" + s.run[:len(s.run)-1]
			if res := s.do("POST", "/admin/users", s.adminToken(), `{"id":"`+user+`","balance":100}`); res.status != http.StatusCreated {
				t.Fatalf("create user: %d %s", res.status, res.raw)
			}
			crewID := s.createCrew(5)
			crews, products := s.count("crews"), s.count("products")
			charge := "/api/users/" + user + "/balance/charge"

			// Each write is valid but for the bad body's twist, which encoding/json let through.
			writes := []struct {
				name, path, token, field, value, others string
			}{
				{"charge", charge, s.token(user), "amount", "5", ""},
				{"join", "/crews/" + crewID + "/join", s.token(user), "userId", `"` + user + `"`, ""},
				{"crew", "/crews", s.adminToken(), "name", `"strict"`, `"maxMembers":3,`},
				{"product", "/admin/products", s.adminToken(), "name", `"strict"`, `"price":10,"stock":5,`},
			}
			for _, w := range writes {
				for _, bad := range badJSONBodies {
					res := s.do("POST", w.path, w.token, bad.body(w.field, w.value, w.others), "Idempotency-Key", s.run+"strict-"+w.name)
					if res.status != http.StatusBadRequest || res.str("error") != "VALIDATION_FAILED" {
						t.Errorf("%s with %s: %d %s", w.name, bad.name, res.status, res.raw)
					}
				}
			}

			if got := s.do("GET", charge[:len(charge)-len("/charge")], s.token(user), ""); got.num("balance") != 100 {
				t.Errorf("balance after refused charges: %s, want 100", got.raw)
			}
			if st := s.stored(crewID); st.currentMembers != 0 || st.members != 0 {
				t.Errorf("refused joins changed the crew: %+v", st)
			}
			if got := s.count("crews"); got != crews {
				t.Errorf("crews: %d after refused creations, %d before", got, crews)
			}
			if got := s.count("products"); got != products {
				t.Errorf("products: %d after refused creations, %d before", got, products)
			}
			// No refused request kept its key: a good charge under it is applied once.
			if res := s.charge(user, "5", "strict-charge"); res.status != http.StatusOK || res.num("balance") != 105 {
				t.Fatalf("good charge under a refused request's key: %d %s", res.status, res.raw)
			}
		})
	}
}

// count is the number of rows of table on a database backend, and -1 on memory, which has no
// tables to count.
func (s *server) count(table string) int {
	s.t.Helper()
	if s.db == nil {
		return -1
	}
	var n int
	if err := s.db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}
