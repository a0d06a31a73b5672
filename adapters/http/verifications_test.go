package http_test

import (
	stdhttp "net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/localblob"
)

// An upload session for a photo answers a presigned URL to the local upload route; a file that
// is not a photo is refused.
func TestUploadSession_OpensForAPhotoAndRefusesAnotherFile(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	token, _ := h.userToken()
	open := func(body string) call {
		return call{method: "POST", path: "/upload-sessions", token: token, body: body}
	}

	rec := h.do(open(`{"fileName":"photo.png","contentType":"image/png","fileSize":10}`))
	require.Equal(t, stdhttp.StatusOK, rec.Code, rec.Body.String())
	session := answer(t, rec)
	assert.NotEmpty(t, session["sessionId"])
	assert.Contains(t, session["presignedUrl"], localblob.RoutePrefix)

	assertError(t, h.do(open(`{"fileName":"virus.exe","contentType":"image/png","fileSize":10}`)), stdhttp.StatusBadRequest, "UNSUPPORTED_FILE")
	// A field left out is missing, not an unsupported file.
	for field, body := range map[string]string{
		"fileSize":    `{"fileName":"photo.png","contentType":"image/png"}`,
		"contentType": `{"fileName":"photo.png","fileSize":10}`,
	} {
		missing := assertError(t, h.do(open(body)), stdhttp.StatusBadRequest, "VALIDATION_FAILED")
		assert.Equal(t, field, missing.Field)
	}
}
