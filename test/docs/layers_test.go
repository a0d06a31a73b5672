package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLayerTables_NameEveryPackage: the README's folder table and the architecture page's
// layer table name each package of application/ and adapters/, so a flow or adapter added there
// is not missing from the map a reader starts with.
func TestLayerTables_NameEveryPackage(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	architecture, err := os.ReadFile(filepath.Join(repoRoot, "docs/architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	// Where each table names a layer's packages: the README's application packages share the
	// row of application/crew (the guard has a row of its own), its adapters have a row each.
	rows := []struct {
		layer, file, text string
		row               *regexp.Regexp
	}{
		{"application", "README.md", string(readme), regexp.MustCompile("(?m)^\\| `application/crew`.*$")},
		{"application", "docs/architecture.md", string(architecture), regexp.MustCompile(`(?m)^\| application \|.*$`)},
		{"adapters", "README.md", string(readme), regexp.MustCompile("(?m)^\\| `adapters/.*$")},
		{"adapters", "docs/architecture.md", string(architecture), regexp.MustCompile(`(?m)^\| adapters \|.*$`)},
	}
	for _, r := range rows {
		entries, err := os.ReadDir(filepath.Join(repoRoot, r.layer))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Join(r.row.FindAllString(r.text, -1), "\n")
		if lines == "" {
			t.Errorf("%s has no row for %s/", r.file, r.layer)
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if !e.IsDir() || (r.layer == "application" && name == "guard" && r.file == "README.md") {
				continue
			}
			if !strings.Contains(lines, "`"+name+"`") && !strings.Contains(lines, "`"+r.layer+"/"+name+"`") {
				t.Errorf("%s: the %s rows do not name %s", r.file, r.layer, name)
			}
		}
	}
}
