package http

import (
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/rushgate/rushgate/adapters/localblob"
	"github.com/rushgate/rushgate/domain"
)

// page is what a paged list's query asks for: limit 0 and cursor "" are the first page at the
// service's default size.
type page struct {
	limit  int
	cursor string
}

// pageQuery reads the optional ?limit= and ?cursor= of a paged list. A limit is a plain decimal
// (digits only: no sign, no leading zero, no space) within 1..domain.MaxPageLimit; a cursor,
// when given, is not empty — a client that turned a last page's null nextCursor into "" would
// otherwise be served the first page again, and loop.
func pageQuery(c *gin.Context) (page, error) {
	var p page
	if raw, present := c.GetQuery("limit"); present {
		n, ok := plainDecimal(raw)
		if !ok || n < 1 || n > domain.MaxPageLimit {
			return page{}, domain.Invalid("limit", "must be a plain decimal integer between 1 and %d", domain.MaxPageLimit)
		}
		p.limit = n
	}
	cursor, err := optionalQuery(c, "cursor")
	if err != nil {
		return page{}, err
	}
	p.cursor = cursor
	return p, nil
}

// plainDecimal reads raw as a non-negative integer written only with ASCII digits and no
// leading zero ("0" itself aside); strconv.Atoi alone would take "+5" and "007".
func plainDecimal(raw string) (int, bool) {
	if raw == "" || len(raw) > 1 && raw[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] < '0' || raw[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(raw)
	return n, err == nil
}

// optionalQuery reads the optional query parameter name: "" when absent, and VALIDATION_FAILED
// naming it when given empty, which is none of the values a parameter of rushgate takes.
func optionalQuery(c *gin.Context, name string) (string, error) {
	value, present := c.GetQuery(name)
	if present && value == "" {
		return "", domain.Invalid(name, "must not be empty when given")
	}
	return value, nil
}

// queryParameters are the query parameters each route takes, by method and route as
// registered; a route without a row takes none, and validateQuery refuses any other.
// TestOpenAPI_DocumentsTheQueryParametersEachRouteTakes holds it equal to openapi.yaml.
var queryParameters = map[string][]string{
	"GET /crews/:crewId/members":                 {"limit", "cursor"},
	"GET /events/:eventId/seats":                 {"limit", "cursor"},
	"GET /challenges/:challengeId/verifications": {"limit", "cursor"},
	"GET /admin/outbox":                          {"status", "limit", "cursor"},
	"GET /api/cart":                              {"userId"},
	"GET /events/:eventId/tickets/waiting":       {"access_token"},
	"GET /events/:eventId/waiting-room":          {"access_token"}, // read by the page's script
	"PUT " + localblob.RoutePrefix + ":key":      {"expires", "signature"},
}

// notAParameter refuses name, a query parameter of none of takes, the parameters of the route.
func notAParameter(name string, takes []string) error {
	if name == "" {
		return domain.Invalid("query", "has a parameter with no name")
	}
	if len(takes) == 0 {
		return domain.Invalid(name, "is not a parameter of this route, which takes none")
	}
	return domain.Invalid(name, "is not a parameter of this route, which takes %s", strings.Join(takes, ", "))
}
