package http

import "github.com/gin-gonic/gin"

// writeJSON writes every JSON answer of the API. HTML escaping is off (gin's c.JSON keeps
// encoding/json's), so a presigned URL reads `?a=1&b=2`, not `\u0026`, to a shell or a client
// that does not decode JSON; the answers are application/json, never embedded in HTML.
func writeJSON(c *gin.Context, status int, v any) {
	c.PureJSON(status, v)
}
