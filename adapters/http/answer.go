package http

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/gin-gonic/gin"
)

// answerBuffers holds the buffers answers are encoded into: c.Data copies the body into the
// connection's writer, so a buffer is free again once it returns. One grown past
// maxPooledAnswer (a long page) is left to the garbage collector rather than kept.
var answerBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledAnswer = 64 << 10

// writeJSON writes every JSON answer of the API. HTML escaping is off (gin's c.JSON keeps
// encoding/json's), so a presigned URL reads `?a=1&b=2`, not `\u0026`, to a shell or a client
// that does not decode JSON; the answers are application/json, never embedded in HTML. The body
// is the value alone, with no newline after it, as c.JSON writes it.
func writeJSON(c *gin.Context, status int, v any) {
	body := answerBuffers.Get().(*bytes.Buffer)
	body.Reset()
	defer func() {
		if body.Cap() <= maxPooledAnswer {
			answerBuffers.Put(body)
		}
	}()
	enc := json.NewEncoder(body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// A value that does not encode is a fault of the server: answered and logged as every
		// other one, never with an empty body. INTERNAL's own body always encodes, so this goes
		// one level deep at most.
		respondError(c, fmt.Errorf("encode answer: %w", err))
		return
	}
	c.Data(status, "application/json; charset=utf-8", bytes.TrimSuffix(body.Bytes(), []byte("\n")))
}
