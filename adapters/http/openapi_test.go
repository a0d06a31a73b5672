package http_test

import (
	"context"
	stdhttp "net/http"
	"regexp"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rhttp "github.com/rushgate/rushgate/adapters/http"
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
	assert.ElementsMatch(t, rhttp.ErrorCodes(), documented)
}
