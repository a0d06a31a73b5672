package http_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
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
	"github.com/rushgate/rushgate/domain"
)

// specStatus is the status the specification gives each error code the service can answer
// with. A new code gets a row here; the status table itself needs one only when the code's
// status is not its kind's.
var specStatus = map[string]int{
	"VALIDATION_FAILED":         400,
	"IDEMPOTENCY_KEY_REQUIRED":  400,
	"CREW_FULL":                 400,
	"AMOUNT_OVERFLOW":           400,
	"INVALID_AMOUNT":            400,
	"INSUFFICIENT_STOCK":        400,
	"EMPTY_CART":                400,
	"INVALID_COUPON":            400,
	"ORDER_NOT_PAYABLE":         400,
	"ORDER_NOT_CANCELLABLE":     400,
	"INSUFFICIENT_BALANCE":      400,
	"UNSUPPORTED_FILE":          400,
	"INVALID_SESSION":           400,
	"INVALID_IMAGE_KEY":         400,
	"IMAGE_NOT_UPLOADED":        400,
	"DEADLINE_PASSED":           400,
	"UNAUTHORIZED":              401,
	"FORBIDDEN":                 403,
	"RAFFLE_NOT_WON":            403,
	"ENTRY_TOKEN_REQUIRED":      403,
	"UPLOAD_SIGNATURE_INVALID":  403,
	"UPLOAD_URL_EXPIRED":        403,
	"NOT_FOUND":                 404,
	"CREW_NOT_FOUND":            404,
	"NOT_MEMBER":                404,
	"USER_NOT_FOUND":            404,
	"COUPON_NOT_FOUND":          404,
	"PRODUCT_NOT_FOUND":         404,
	"ORDER_NOT_FOUND":           404,
	"OUTBOX_MESSAGE_NOT_FOUND":  404,
	"CHALLENGE_NOT_FOUND":       404,
	"EVENT_NOT_FOUND":           404,
	"NOT_IN_QUEUE":              404,
	"SEAT_NOT_FOUND":            404,
	"RAFFLE_NOT_FOUND":          404,
	"NOT_ENTERED":               404,
	"METHOD_NOT_ALLOWED":        405,
	"REQUEST_TIMEOUT":           408,
	"ALREADY_MEMBER":            409,
	"IDEMPOTENCY_IN_PROGRESS":   409,
	"USER_EXISTS":               409,
	"COUPON_SOLD_OUT":           409,
	"COUPON_EXPIRED":            409,
	"ALREADY_ISSUED":            409,
	"COUPON_ISSUE_FAILED":       409,
	"STOCK_DEDUCTION_FAILED":    409,
	"OUTBOX_MESSAGE_NOT_FAILED": 409,
	"SESSION_ALREADY_USED":      409,
	"ALREADY_VERIFIED":          409,
	"UPLOAD_ALREADY_DONE":       409,
	"WRONG_ADMISSION_MODE":      409,
	"NOT_READY":                 409,
	"SOLD_OUT":                  409,
	"SEAT_BEING_SELECTED":       409,
	"SEAT_ALREADY_RESERVED":     409,
	"RAFFLE_CLOSED":             409,
	"PAYLOAD_TOO_LARGE":         413,
	"IDEMPOTENCY_KEY_REUSED":    422,
	"TOO_MANY_REQUESTS":         429,
	"CLIENT_CLOSED_REQUEST":     499,
	"INTERNAL":                  500,
	"UNAVAILABLE":               503,
}

// TestStatusTable_AnswersEveryErrorCodeWithItsSpecStatus parses the repository's Go source for
// every error the code creates (domain.NewError(kind, "CODE", …)) and fails when the status the
// edge answers it with is not the specification's: a code of an unmapped kind would answer a
// silent 500, a code of the wrong kind the wrong status.
func TestStatusTable_AnswersEveryErrorCodeWithItsSpecStatus(t *testing.T) {
	t.Parallel()
	created := errorCodesInSource(t, moduleRoot(t))
	// The scan itself works: it finds codes of the domain, a use case and this adapter.
	require.Subset(t, slices.Collect(maps.Keys(created)), []string{"VALIDATION_FAILED", "CREW_FULL", "IDEMPOTENCY_KEY_REQUIRED", "UNAUTHORIZED"})

	for code, c := range created {
		want, known := specStatus[code]
		if !assert.True(t, known, "error code %s (%s) has no status in specStatus", code, c.where) {
			continue
		}
		got := rhttp.StatusOf(&domain.Error{Kind: c.kind, Code: code})
		assert.Equal(t, want, got, "error code %s of kind %q (%s) answers the wrong status", code, c.kind, c.where)
	}
	for code := range specStatus {
		assert.Contains(t, created, code, "specStatus names %s, which nothing creates", code)
	}
	// A code has a status of its own only where its kind's would be wrong.
	for _, code := range rhttp.CodesWithOwnStatus() {
		if c, ok := created[code]; assert.True(t, ok, "the status table names %s, which nothing creates", code) {
			assert.NotEqual(t, rhttp.KindStatus(c.kind), specStatus[code], "%s needs no status of its own: its kind's is the same", code)
		}
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

// createdCode is where an error code is created, and with which kind.
type createdCode struct {
	kind  domain.Kind
	where string
}

// errorCodesInSource returns every error code the module's non-test source creates with
// domain.NewError, each with its kind and the position that creates it. A kind or code argument
// that is neither a string literal nor a string constant of the module fails the test rather
// than being skipped, and so does a domain.Error literal outside package domain: its kind could
// be forgotten, where WithMessage and WithDetails keep the one they copy.
func errorCodesInSource(t *testing.T, root string) map[string]createdCode {
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
	codes := map[string]createdCode{}
	for _, sf := range files {
		imports := importedDirs(sf.file, module)
		resolve := func(e ast.Expr) string {
			where := fset.Position(e.Pos()).String()
			switch e := e.(type) {
			case *ast.BasicLit:
				if s, err := strconv.Unquote(e.Value); err == nil && e.Kind == token.STRING {
					return s
				}
			case *ast.Ident:
				if s, ok := constants[sf.dir][e.Name]; ok {
					return s
				}
			case *ast.SelectorExpr:
				if pkg, ok := e.X.(*ast.Ident); ok {
					if s, ok := constants[imports[pkg.Name]][e.Sel.Name]; ok {
						return s
					}
				}
			}
			require.Fail(t, "unresolved error code or kind", "%s: use a string literal or constant", where)
			return ""
		}
		ast.Inspect(sf.file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				// NewError's own body passes its parameters on; its callers are what is found.
				return sf.dir != domainDir || n.Name.Name != "NewError"
			case *ast.CallExpr:
				if isDomainName(n.Fun, "NewError", sf.dir, imports) && len(n.Args) == 3 {
					code := resolve(n.Args[1])
					codes[code] = createdCode{kind: domain.Kind(resolve(n.Args[0])), where: fset.Position(n.Pos()).String()}
				}
			case *ast.CompositeLit:
				if sf.dir != domainDir && isDomainName(n.Type, "Error", sf.dir, imports) {
					require.Fail(t, "domain.Error literal", "%s: create errors with domain.NewError, derive them with WithMessage or WithDetails",
						fset.Position(n.Pos()))
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
