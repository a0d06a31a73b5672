package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestAPIGuide_NamesEveryRouteWithoutAToken: the API guide's Authentication section names each
// route the OpenAPI document lets through without a token (security: []), so that its "every
// route needs a token but …" holds.
func TestAPIGuide_NamesEveryRouteWithoutAToken(t *testing.T) {
	doc, section := openAPIAndGuideSection(t, "Authentication")
	open := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Security == nil || len(*op.Security) > 0 {
				continue // the document's bearer default, or a scheme of its own
			}
			open++
			if route := "`" + method + " " + path + "`"; !strings.Contains(section, route) {
				t.Errorf("docs/api.md's Authentication does not name %s, which needs no token", route)
			}
		}
	}
	if open == 0 {
		t.Fatal("the OpenAPI document has no route without a token: not read right")
	}
}

// routeNamed matches a route as the API guide's flows table names it: `POST /crews`, or two
// methods of one path, `POST` and `DELETE /events/{eventId}/queue`.
var routeNamed = regexp.MustCompile("`(?:([A-Z]+)` and `)?([A-Z]+) (/[^`\\s]*)`")

// TestAPIGuide_FlowsNameEveryRoute: the API guide's flows table names every route of the
// OpenAPI document, so a reader of the guide alone misses none.
func TestAPIGuide_FlowsNameEveryRoute(t *testing.T) {
	doc, section := openAPIAndGuideSection(t, "The flows")
	named := map[string]bool{}
	for _, m := range routeNamed.FindAllStringSubmatch(section, -1) {
		named[m[2]+" "+m[3]] = true
		if m[1] != "" {
			named[m[1]+" "+m[3]] = true
		}
	}
	if len(named) == 0 {
		t.Fatal("docs/api.md's flows table names no route: not read right")
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			// The signed upload is named as what a client does with it: PUT the presignedUrl.
			if route := method + " " + path; !named[route] && route != "PUT /uploads/{key}" {
				t.Errorf("docs/api.md's flows table does not name `%s`", route)
			}
		}
	}
}

// openAPIAndGuideSection reads the OpenAPI document and the API guide's section of that title.
func openAPIAndGuideSection(t *testing.T, title string) (*openapi3.T, string) {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(filepath.Join(repoRoot, "adapters/http/openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs/api.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(raw), "\n## "+title+"\n")
	if !found {
		t.Fatalf("docs/api.md has no %s section", title)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	return doc, section
}
