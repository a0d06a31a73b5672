package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestAPIGuide_NamesEveryRouteWithoutAToken: the API guide's Authentication section names each
// route the OpenAPI document lets through without a token (security: []), so that its "every
// route needs a token but …" holds.
func TestAPIGuide_NamesEveryRouteWithoutAToken(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromFile(filepath.Join(repoRoot, "adapters/http/openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs/api.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(raw), "\n## Authentication\n")
	section, _, _ = strings.Cut(section, "\n## ")
	if section == "" {
		t.Fatal("docs/api.md has no Authentication section")
	}
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
