package http

import (
	"bytes"
	"encoding/json"

	"github.com/gin-gonic/gin"
)

// writeJSON writes every JSON answer of the API. HTML escaping is off (gin's c.JSON keeps
// encoding/json's), so a presigned URL reads `?a=1&b=2`, not `\u0026`, to a shell or a client
// that does not decode JSON; the answers are application/json, never embedded in HTML. The body
// is the value alone, with no newline after it, as c.JSON writes it.
func writeJSON(c *gin.Context, status int, v any) {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		_ = c.Error(err)
		c.AbortWithStatus(500)
		return
	}
	c.Data(status, "application/json; charset=utf-8", bytes.TrimSuffix(body.Bytes(), []byte("\n")))
}
