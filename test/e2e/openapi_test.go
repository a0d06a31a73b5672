package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// openAPIRouter routes requests to the operations of the document the server publishes.
var openAPIRouter = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromFile("../../adapters/http/openapi.yaml")
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	// Match paths on any host: the tests' servers listen on ephemeral ports.
	doc.Servers = nil
	return legacy.NewRouter(doc)
})

// checkAgainstOpenAPI fails the test when an answer is not one openapi.yaml documents for its
// operation — its status, headers and body schema — so the document cannot drift from what the
// server answers. Requests for routes the document does not know are checked only to have
// been refused as unknown.
func checkAgainstOpenAPI(t *testing.T, req *http.Request, res *http.Response, body []byte) {
	t.Helper()
	router, err := openAPIRouter()
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	// Route on the escaped path, as the server does (gin's UseEscapedPath): an escaped slash stays
	// inside its segment, as in an upload URL's object key.
	routed := req.Clone(req.Context())
	routed.URL.Path, routed.URL.RawPath = req.URL.EscapedPath(), ""
	route, params, err := router.FindRoute(routed)
	if err != nil {
		switch res.StatusCode {
		case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusBadRequest:
		default:
			t.Errorf("%s %s answered %d but is not an operation of openapi.yaml: %v", req.Method, req.URL.Path, res.StatusCode, err)
		}
		return
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 res.StatusCode,
		Header:                 res.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		t.Errorf("%s %s answered %d %s, which openapi.yaml does not allow: %v", req.Method, req.URL.Path, res.StatusCode, body, err)
	}
}
