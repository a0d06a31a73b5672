package http

import (
	_ "embed"
	"encoding/json"
	"fmt"
	stdhttp "net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	appwaiting "github.com/rushgate/rushgate/application/waiting"
	"github.com/rushgate/rushgate/ports"
)

// DefaultSSEHeartbeat is the comment-line period of an SSE stream when Deps.SSEHeartbeat is zero.
const DefaultSSEHeartbeat = 15 * time.Second

//go:embed web/waiting-room.html
var waitingRoomPage []byte

// errNoBroker answers the SSE route on an instance that runs no broker (--role dispatcher).
var errNoBroker = fmt.Errorf("this instance runs no broker: %w", ports.ErrUnavailable)

// pushHandlers serves the push mode's SSE stream and the waiting page (SPEC §3).
type pushHandlers struct {
	broker    *appwaiting.Broker
	heartbeat time.Duration
}

// queryToken lets a request without an Authorization header authenticate with ?access_token=,
// for the SSE route and the page: browsers' EventSource cannot send headers.
func queryToken() gin.HandlerFunc {
	return func(c *gin.Context) {
		if token := c.Query("access_token"); token != "" && c.GetHeader("Authorization") == "" {
			c.Request.Header.Set("Authorization", "Bearer "+token)
		}
		c.Next()
	}
}

// page answers GET /events/{eventId}/waiting-room: the page reads the event and token from its
// own URL.
func (h pushHandlers) page(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	c.Header("Content-Security-Policy", "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'")
	c.Data(stdhttp.StatusOK, "text/html; charset=utf-8", waitingRoomPage)
}

// wait answers GET /events/{eventId}/tickets/waiting: it enters the queue and streams
// `position` events every tick, `admitted` with the entry token, and heartbeat comments, until
// the client leaves or the server shuts down.
func (h pushHandlers) wait(c *gin.Context) {
	if h.broker == nil {
		respondError(c, errNoBroker)
		return
	}
	ctx := c.Request.Context()
	sub, err := h.broker.Join(ctx, c.Param("eventId"), principal(c).UserID)
	if err != nil {
		respondError(c, err)
		return
	}
	defer h.broker.Leave(sub)
	// The stream outlives the server's read timeout, whose expiry would cancel the request.
	rc := stdhttp.NewResponseController(c.Writer)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	header := c.Writer.Header()
	header.Set("Content-Type", "text/event-stream")
	header.Set("Cache-Control", "no-store")
	header.Set("X-Accel-Buffering", "no")
	c.Status(stdhttp.StatusOK)
	if !h.send(c, ": connected\n\n") {
		return
	}
	heartbeat := time.NewTicker(h.heartbeat)
	defer heartbeat.Stop()
	for {
		var ok bool
		select {
		case <-ctx.Done():
			return
		case <-sub.Done():
			return
		case p := <-sub.Positions():
			ok = h.event(c, "position", p.Tick, p.PositionView)
		case a := <-sub.Admitted():
			ok = h.event(c, "admitted", a.PromotedAt, a.TokenView)
		case <-heartbeat.C:
			ok = h.send(c, ": heartbeat\n\n")
		}
		if !ok {
			return
		}
	}
}

// event writes one event; its id is at (unix ms: the tick of a position, the promotion of an
// admission), so clients can measure how late it arrived. Zero at writes no id.
func (h pushHandlers) event(c *gin.Context, name string, at time.Time, data any) bool {
	body, err := json.Marshal(data)
	if err != nil {
		return false
	}
	frame := "event: " + name + "\ndata: " + string(body) + "\n\n"
	if !at.IsZero() {
		frame = "id: " + strconv.FormatInt(at.UnixMilli(), 10) + "\n" + frame
	}
	return h.send(c, frame)
}

// send writes and flushes; false once the client is gone.
func (h pushHandlers) send(c *gin.Context, frame string) bool {
	if _, err := c.Writer.WriteString(frame); err != nil {
		return false
	}
	c.Writer.Flush()
	return true
}
