package http

import (
	"github.com/gin-gonic/gin"

	"github.com/rushgate/rushgate/application/guard"
)

// actingUserBody is the optional body of the routes that act as the authenticated user (join,
// issue): userId is accepted only to be checked, as the seeds send it.
type actingUserBody struct {
	UserID *string `json:"userId"`
}

// actingUser is the authenticated user, once the optional body has been read: a userId there
// that is not theirs is FORBIDDEN.
func actingUser(c *gin.Context) (string, error) {
	user := principal(c).UserID
	var body actingUserBody
	if err := decodeJSON(c.Request, &body, true); err != nil {
		return "", err
	}
	if err := checkClaimedUser(c, body.UserID); err != nil {
		return "", err
	}
	return user, nil
}

// respondGuarded answers a guarded call: its value on the wire with its outcome's status,
// marked Idempotent-Replayed when it is a stored answer, or its error.
func respondGuarded[T, W any](c *gin.Context, res guard.Result[T], err error, wire func(T) W) {
	if err != nil {
		respondError(c, err)
		return
	}
	if res.Replayed {
		c.Header(IdempotentReplayedHeader, "true")
	}
	writeJSON(c, statusOf(res.Outcome), wire(res.Value))
}
