package architecture

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// routeLike matches a string that names an HTTP route: a method and a path ("POST /crews"), an
// absolute path ("/crews/", "/join"), or the API's prefix anywhere ("users/api/").
var routeLike = regexp.MustCompile(`^(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS) /|^/[A-Za-z{:]|/api/`)

// TestCoreKnowsNoWireFormatAndNoURL: the core's types carry no `json:` tags (the answers' wire
// types live in adapters/http, a message's in its adapter) and its strings name no route (a
// fingerprint names its operation, "crew.join", not "POST /crews/{id}/join"). Test files are
// free to.
func TestCoreKnowsNoWireFormatAndNoURL(t *testing.T) {
	for _, core := range []string{"domain", "ports", "application"} {
		t.Run(core, func(t *testing.T) {
			files := 0
			err := filepath.WalkDir(filepath.Join("..", "..", core), func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
					return err
				}
				files++
				checkNoWireFormatOrURL(t, path)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if files == 0 {
				t.Fatalf("no Go files under %s", core)
			}
		})
	}
}

func checkNoWireFormatOrURL(t *testing.T, path string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ImportSpec:
			return false // import paths are not routes
		case *ast.Field:
			if n.Tag == nil {
				return true
			}
			tag, err := strconv.Unquote(n.Tag.Value)
			if err != nil {
				t.Errorf("%s: unreadable struct tag %s", fset.Position(n.Pos()), n.Tag.Value)
				return true
			}
			if _, ok := reflect.StructTag(tag).Lookup("json"); ok {
				t.Errorf("%s: a json tag in the core (%s): wire types belong in the adapter that speaks the format",
					fset.Position(n.Pos()), tag)
			}
		case *ast.BasicLit:
			if n.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(n.Value); err == nil && routeLike.MatchString(s) {
				t.Errorf("%s: %q looks like an HTTP route: the core names operations, never URLs",
					fset.Position(n.Pos()), s)
			}
		}
		return true
	})
}
