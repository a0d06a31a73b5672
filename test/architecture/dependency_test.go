// Package architecture enforces the dependency rule: the core (domain, ports, application)
// imports no infrastructure.
package architecture

import (
	"os/exec"
	"strings"
	"testing"
)

// forbidden lists import-path prefixes the core must never reach, directly or transitively.
var forbidden = []string{
	"github.com/gin-gonic/",
	"go.opentelemetry.io/",
	"gorm.io/",
	"github.com/redis/go-redis/",
	"github.com/go-redsync/",
	"github.com/aws/",
	"go.uber.org/fx",
	"go.uber.org/dig",
	"github.com/jackc/",
	"github.com/go-sql-driver/",
	"net/http",
	"database/sql",
	"github.com/rushgate/rushgate/adapters",
	"github.com/rushgate/rushgate/bootstrap",
}

// deps is what `go list -deps` prints for args, one package a line; none fails the test.
func deps(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	packages := strings.Fields(string(out))
	if len(packages) == 0 {
		t.Fatal("go list returned no packages")
	}
	return packages
}

func TestCoreImportsNoInfrastructure(t *testing.T) {
	for _, core := range []string{"domain", "ports", "application"} {
		t.Run(core, func(t *testing.T) {
			for _, dep := range deps(t, "github.com/rushgate/rushgate/"+core+"/...") {
				for _, bad := range forbidden {
					if strings.HasPrefix(dep, bad) {
						t.Errorf("%s reaches %s", core, dep)
					}
				}
			}
		})
	}
}

// TestPorttestImportsOnlyTheCore: an adapter's tests that import ports/porttest get nothing but
// ports, domain, test/testkit and the standard library with it.
func TestPorttestImportsOnlyTheCore(t *testing.T) {
	for _, dep := range deps(t, "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/rushgate/rushgate/ports/porttest") {
		inner, ours := strings.CutPrefix(dep, "github.com/rushgate/rushgate/")
		allowed := inner == "ports" || inner == "domain" || inner == "test/testkit" ||
			strings.HasPrefix(inner, "ports/") || strings.HasPrefix(inner, "domain/")
		if !ours || !allowed {
			t.Errorf("ports/porttest reaches %s", dep)
		}
	}
}
