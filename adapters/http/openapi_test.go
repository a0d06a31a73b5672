package http_test

import (
	"bytes"
	"context"
	"io"
	"maps"
	stdhttp "net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ginParam matches a gin path parameter (":crewId") to rewrite it the OpenAPI way ("{crewId}"),
// and openAPIParam an OpenAPI one to rewrite it the gin way.
var (
	ginParam     = regexp.MustCompile(`:([A-Za-z0-9_]+)`)
	openAPIParam = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)
)

func TestOpenAPI_DocumentsExactlyTheRouterRoutes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})

	served := h.do(call{method: "GET", path: "/openapi.yaml"})
	require.Equal(t, stdhttp.StatusOK, served.Code)
	assert.Equal(t, "application/yaml", served.Header().Get("Content-Type"))

	doc, err := openapi3.NewLoader().LoadFromData(served.Body.Bytes())
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))

	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	var routed []string
	for _, r := range h.router.Routes() {
		routed = append(routed, r.Method+" "+ginParam.ReplaceAllString(r.Path, "{$1}"))
	}
	slices.Sort(documented)
	slices.Sort(routed)
	assert.Equal(t, routed, documented, "the router's routes and the document's operations differ")
}

func TestOpenAPI_DocumentsEveryErrorCode(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	doc, err := openapi3.NewLoader().LoadFromData(h.do(call{method: "GET", path: "/openapi.yaml"}).Body.Bytes())
	require.NoError(t, err)

	var documented []string
	for _, v := range doc.Components.Schemas["Error"].Value.Properties["error"].Value.Enum {
		documented = append(documented, v.(string))
	}
	assert.ElementsMatch(t, slices.Collect(maps.Keys(errorCodesInSource(t, moduleRoot(t)))), documented)
}

// documented checks rec, the answer to method target, against the document's route for it: its
// status must be listed, and its headers and body match that answer's schema.
func documented(t *testing.T, router routers.Router, method, target string, rec *httptest.ResponseRecorder) error {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	route, params, err := router.FindRoute(req)
	require.NoError(t, err)
	return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 rec.Code,
		Header:                 rec.Header(),
		Body:                   io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	})
}

// TestOpenAPI_OperationalAnswersMatchTheDocument: /healthz (with the build it names) and
// /readyz answer what the document's schemas allow, and nothing more.
func TestOpenAPI_OperationalAnswersMatchTheDocument(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	doc, err := openapi3.NewLoader().LoadFromData(h.do(call{method: "GET", path: "/openapi.yaml"}).Body.Bytes())
	require.NoError(t, err)
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	require.NoError(t, err)

	for _, path := range []string{"/healthz", "/readyz"} {
		t.Run(path, func(t *testing.T) {
			rec := h.do(call{method: "GET", path: path})
			require.Equal(t, stdhttp.StatusOK, rec.Code, rec.Body.String())
			assert.NoError(t, documented(t, router, "GET", path, rec), "%s answered %s", path, rec.Body.String())
		})
	}
}

// TestOpenAPI_EveryRouteReadingABodyDocumentsItsTooLargeAnswer sends a body over the limit to
// every route taking a JSON body or none ({} at most) — every POST, PATCH and DELETE; the signed
// upload reads its own — and requires the 413 PAYLOAD_TOO_LARGE it answers to be one the document
// gives that route.
func TestOpenAPI_EveryRouteReadingABodyDocumentsItsTooLargeAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{maxBodyBytes: 64})
	doc, err := openapi3.NewLoader().LoadFromData(h.do(call{method: "GET", path: "/openapi.yaml"}).Body.Bytes())
	require.NoError(t, err)
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	require.NoError(t, err)
	pathParam := regexp.MustCompile(`\{([A-Za-z]+)\}`)
	valueOf := map[string]string{"userId": "admin-1", "seatId": "1"} // an admin acting as itself
	tooLarge := `{"name":"` + strings.Repeat("x", 128) + `"}`

	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if method != stdhttp.MethodPost && method != stdhttp.MethodPatch && method != stdhttp.MethodDelete {
				continue
			}
			target := pathParam.ReplaceAllStringFunc(path, func(p string) string {
				if v, ok := valueOf[p[1:len(p)-1]]; ok {
					return v
				}
				return "00000000-0000-4000-8000-000000000000"
			})
			t.Run(method+" "+path, func(t *testing.T) {
				rec := h.do(call{method: method, path: target, token: h.admin(), idempotencyKey: "k1", body: tooLarge})
				assertError(t, rec, stdhttp.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE")

				assert.NoError(t, documented(t, router, method, target, rec), "the document gives %s %s no 413", method, path)
			})
		}
	}
}

// A null member of a request body is that member absent: the document says so of every
// optional member (nullable) and of no required one.
func TestOpenAPI_OptionalRequestMembersAreNullable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	doc, err := openapi3.NewLoader().LoadFromData(h.do(call{method: "GET", path: "/openapi.yaml"}).Body.Bytes())
	require.NoError(t, err)
	checked := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody == nil || op.RequestBody.Value.Content.Get("application/json") == nil {
				continue
			}
			schema := op.RequestBody.Value.Content.Get("application/json").Schema.Value
			for name, prop := range schema.Properties {
				checked++
				optional := !slices.Contains(schema.Required, name)
				assert.Equal(t, optional, prop.Value.Nullable, "%s %s: member %s (optional: %v)", method, path, name, optional)
			}
		}
	}
	assert.NotZero(t, checked)
}
