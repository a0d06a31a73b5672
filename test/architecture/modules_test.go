package architecture

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLibraryModuleCarriesNoDevelopmentTools: the development tools live in tools/go.mod, so
// the library's module graph, the one an embedder's go get resolves, holds none of them.
func TestLibraryModuleCarriesNoDevelopmentTools(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "all").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -m all: %v\n%s", err, out)
	}
	modules := strings.Fields(string(out))
	if len(modules) == 0 {
		t.Fatal("go list -m all returned no modules")
	}
	for _, module := range modules {
		if strings.HasPrefix(module, "github.com/golangci/") {
			t.Errorf("the library's module graph holds %s: development tools belong in tools/go.mod", module)
		}
	}
}
