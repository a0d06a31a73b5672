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
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ginParam matches a gin path parameter (":crewId") to rewrite it the OpenAPI way ("{crewId}").
var ginParam = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

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
			req := httptest.NewRequest("GET", path, nil)
			route, params, err := router.FindRoute(req)
			require.NoError(t, err)
			err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
				RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
				Status:                 rec.Code,
				Header:                 rec.Header(),
				Body:                   io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
				Options:                &openapi3filter.Options{IncludeResponseStatus: true},
			})
			assert.NoError(t, err, "%s answered %s", path, rec.Body.String())
		})
	}
}
