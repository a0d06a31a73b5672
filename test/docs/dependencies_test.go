package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// codeName matches a name in backticks.
var codeName = regexp.MustCompile("`([^`]+)`")

// TestReadme_DependenciesTableNamesEveryDirectRequirement: the README's "Dependencies and why"
// names each module go.mod requires directly, and each module it names is required (by go.mod
// or, for the tools, tools/go.mod), so that a dependency added or dropped takes its reason with
// it.
func TestReadme_DependenciesTableNamesEveryDirectRequirement(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Dependencies and why\n")
	if !ok {
		t.Fatal("README has no Dependencies and why section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	named := tableModules(section)
	if len(named) == 0 {
		t.Fatal("the Dependencies table names no module: not read right")
	}

	direct := requirements(t, filepath.Join(repoRoot, "go.mod"), false)
	if len(direct) == 0 {
		t.Fatal("go.mod requires nothing directly: not read right")
	}
	for module := range direct {
		if !named[module] {
			t.Errorf("go.mod requires %s, which the README's Dependencies table does not explain", module)
		}
	}
	tools := requirements(t, filepath.Join(repoRoot, "tools", "go.mod"), true)
	for module := range named {
		if !direct[module] && !tools[module] {
			t.Errorf("the README's Dependencies table names %s, which neither go.mod nor tools/go.mod requires", module)
		}
	}
}

// tableModules returns the modules a Dependencies table's first column names: each full module
// path in backticks, and each path in backticks after one (`sdk` after `go.opentelemetry.io/otel`)
// as a module under it.
func tableModules(section string) map[string]bool {
	modules := map[string]bool{}
	for line := range strings.Lines(section) {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "| `") {
			continue // not a row, or the header
		}
		base := ""
		for _, m := range codeName.FindAllStringSubmatch(cells[1], -1) {
			name := m[1]
			if first, _, _ := strings.Cut(name, "/"); strings.Contains(first, ".") {
				base = name
				modules[name] = true
			} else if base != "" {
				modules[base+"/"+name] = true
			}
		}
	}
	return modules
}

// requirements returns the modules the go.mod file at path requires: all of them, or only those
// not marked // indirect.
func requirements(t *testing.T, path string, indirectToo bool) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	file, err := modfile.ParseLax(path, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	modules := map[string]bool{}
	for _, r := range file.Require {
		if indirectToo || !r.Indirect {
			modules[r.Mod.Path] = true
		}
	}
	return modules
}
