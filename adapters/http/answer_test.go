package http

import (
	"bytes"
	"encoding/json"
	"log/slog"
	stdhttp "net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An answer that does not encode (here an instant in the year 10000, which encoding/json
// refuses) is the JSON 500 INTERNAL of every server fault, logged at error level with the
// request id, never an empty body.
func TestWriteJSON_UnencodableAnswerIsLoggedInternalError(t *testing.T) {
	var logs bytes.Buffer
	rec := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(rec)
	c.Request = httptest.NewRequest("GET", "/challenges/x", stdhttp.NoBody)
	c.Set(loggerKey, slog.New(slog.NewJSONHandler(&logs, nil)))
	c.Set(requestIDKey, "req-encode-1")

	writeJSON(c, stdhttp.StatusOK, map[string]time.Time{"deadline": time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})

	require.Equal(t, stdhttp.StatusInternalServerError, rec.Code)
	assert.Contains(t, rec.Header().Get("Content-Type"), "application/json")
	assert.JSONEq(t, `{"error":"INTERNAL","message":"internal server error"}`, rec.Body.String())
	var line map[string]any
	require.NoError(t, json.Unmarshal(logs.Bytes(), &line), logs.String())
	assert.Equal(t, "ERROR", line["level"])
	assert.Equal(t, "req-encode-1", line["requestId"])
	assert.Contains(t, line["error"], "encode answer")
}
