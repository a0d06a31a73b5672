package http

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"

	"github.com/rushgate/rushgate/application/guard"
)

// Every guard.Outcome constant needs a status, or a new outcome would silently answer 200.
func TestStatusByOutcome_CoversEveryOutcome(t *testing.T) {
	file, err := parser.ParseFile(token.NewFileSet(), "../../application/guard/guard.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	ast.Inspect(file, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok || spec.Type == nil {
			return true
		}
		if ident, ok := spec.Type.(*ast.Ident); !ok || ident.Name != "Outcome" {
			return true
		}
		for _, v := range spec.Values {
			lit, ok := v.(*ast.BasicLit)
			if !ok {
				t.Fatalf("outcome %v is not a literal", spec.Names)
			}
			found++
			outcome := guard.Outcome(lit.Value[1 : len(lit.Value)-1])
			if _, mapped := statusByOutcome[outcome]; !mapped {
				t.Errorf("outcome %q has no status in statusByOutcome", outcome)
			}
		}
		return true
	})
	if found == 0 {
		t.Fatal("found no guard.Outcome constants: did the declaration move?")
	}
}
