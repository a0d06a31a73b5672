package http

import (
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

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

// pageParameters are the query parameters of a paged list (pageQuery).
var pageParameters = []string{"limit", "cursor"}

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

// QueryParameters are the query parameters each route takes, by method and path as registered
// ("GET /crews/:crewId/members"), which each flow's Routes declare beside the route (Take,
// TakePage). validateQuery refuses any other on every route but a page: it would be ignored,
// so "?limt=5", a typo, would be served as if no limit was given. A route declared nowhere
// takes none.
type QueryParameters map[string]queryRule

type queryRule struct {
	names []string
	// page marks a page a person opens from a link, whose parameters are not all its own:
	// sites and mail add theirs (utm_source, fbclid …), and a page must open all the same.
	page bool
}

// Take declares that the route method path takes the query parameters names.
func (q QueryParameters) Take(method, path string, names ...string) {
	q[method+" "+path] = queryRule{names: names}
}

// TakePage declares that the page served at method path reads the query parameters names and
// ignores any other.
func (q QueryParameters) TakePage(method, path string, names ...string) {
	q[method+" "+path] = queryRule{names: names, page: true}
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
