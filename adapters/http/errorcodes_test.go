package http_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rhttp "github.com/rushgate/rushgate/adapters/http"
)

// TestStatusTable_KnowsEveryErrorCode parses the repository's Go source for every error code
// created (domain.NewError("CODE", …) or a domain.Error literal with a Code) and fails when the
// status table lacks one: an unmapped code would answer a silent 500.
func TestStatusTable_KnowsEveryErrorCode(t *testing.T) {
	t.Parallel()
	codes := errorCodesInSource(t, moduleRoot(t))
	// The scan itself works: it finds codes of the domain, a use case and this adapter.
	require.Subset(t, keys(codes), []string{"VALIDATION_FAILED", "CREW_FULL", "IDEMPOTENCY_KEY_REQUIRED", "UNAUTHORIZED"})

	mapped := rhttp.ErrorCodes()
	for code, where := range codes {
		assert.Contains(t, mapped, code, "error code %s (%s) has no status in adapters/http statusByCode", code, where)
	}
}

// moduleRoot is the nearest directory above the test holding go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test")
		dir = parent
	}
}

// sourceFile is one parsed non-test Go file and the module directory it belongs to.
type sourceFile struct {
	dir  string
	file *ast.File
}

// errorCodesInSource returns every error code the module's non-test source creates, each with
// the position that creates it. A code argument that is neither a string literal nor a string
// constant of the module fails the test rather than being skipped.
func errorCodesInSource(t *testing.T, root string) map[string]string {
	t.Helper()
	module := modulePath(t, root)
	fset := token.NewFileSet()
	var files []sourceFile
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && (name == "vendor" || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		files = append(files, sourceFile{dir: filepath.ToSlash(rel), file: f})
		return nil
	})
	require.NoError(t, err)

	constants := stringConstants(files)
	codes := map[string]string{}
	for _, sf := range files {
		imports := importedDirs(sf.file, module)
		resolve := func(e ast.Expr) (string, bool) {
			switch e := e.(type) {
			case *ast.BasicLit:
				s, err := strconv.Unquote(e.Value)
				return s, err == nil && e.Kind == token.STRING
			case *ast.Ident:
				s, ok := constants[sf.dir][e.Name]
				return s, ok
			case *ast.SelectorExpr:
				if pkg, ok := e.X.(*ast.Ident); ok {
					s, ok := constants[imports[pkg.Name]][e.Sel.Name]
					return s, ok
				}
			}
			return "", false
		}
		record := func(e ast.Expr) {
			where := fset.Position(e.Pos()).String()
			code, ok := resolve(e)
			require.True(t, ok, "%s: cannot tell which error code this is; use a string literal or constant", where)
			codes[code] = where
		}
		// The parameters of the function being walked: a code passed in is found at the callers
		// (NewError's own body builds an Error from its code parameter).
		var params map[string]bool
		ast.Inspect(sf.file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				params = map[string]bool{}
				for _, field := range n.Type.Params.List {
					for _, name := range field.Names {
						params[name.Name] = true
					}
				}
			case *ast.CallExpr:
				if isDomainName(n.Fun, "NewError", sf.dir, imports) && len(n.Args) > 0 {
					record(n.Args[0])
				}
			case *ast.CompositeLit:
				if !isDomainName(n.Type, "Error", sf.dir, imports) {
					return true
				}
				for _, elt := range n.Elts {
					kv, ok := elt.(*ast.KeyValueExpr)
					if key, isIdent := kv.Key.(*ast.Ident); !ok || !isIdent || key.Name != "Code" {
						continue
					}
					// x.Code copies the code of an error created elsewhere, which is found there.
					if sel, ok := kv.Value.(*ast.SelectorExpr); ok && sel.Sel.Name == "Code" {
						continue
					}
					if id, ok := kv.Value.(*ast.Ident); ok && params[id.Name] {
						continue
					}
					record(kv.Value)
				}
			}
			return true
		})
	}
	return codes
}

// domainDir is the directory of package domain, which creates error codes.
const domainDir = "domain"

// isDomainName reports whether e names package domain's name: domain.NewError elsewhere, or a
// bare NewError inside package domain.
func isDomainName(e ast.Expr, name, dir string, imports map[string]string) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return dir == domainDir && e.Name == name
	case *ast.SelectorExpr:
		pkg, ok := e.X.(*ast.Ident)
		return ok && imports[pkg.Name] == domainDir && e.Sel.Name == name
	}
	return false
}

// stringConstants maps each module directory to its package-level string constants.
func stringConstants(files []sourceFile) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, sf := range files {
		for _, decl := range sf.file.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					if s, err := strconv.Unquote(lit.Value); err == nil {
						if out[sf.dir] == nil {
							out[sf.dir] = map[string]string{}
						}
						out[sf.dir][name.Name] = s
					}
				}
			}
		}
	}
	return out
}

// importedDirs maps the names a file uses for the module's packages to their directories.
func importedDirs(f *ast.File, module string) map[string]string {
	out := map[string]string{}
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil || (p != module && !strings.HasPrefix(p, module+"/")) {
			continue
		}
		dir := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		if dir == "" {
			dir = "."
		}
		name := path.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		out[name] = dir
	}
	return out
}

// modulePath reads the module line of root's go.mod.
func modulePath(t *testing.T, root string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatal("go.mod has no module line")
	return ""
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
