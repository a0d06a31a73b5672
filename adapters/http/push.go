package http

import (
	"bytes"
	_ "embed"
	"fmt"
	stdhttp "net/http"
	"net/url"
	"time"
	"unique"

	"github.com/gin-gonic/gin"

	appwaiting "github.com/rushgate/rushgate/application/waiting"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/ports"
)

// DefaultSSEHeartbeat is the comment-line period of an SSE stream when PushRoutes is given zero.
const DefaultSSEHeartbeat = 15 * time.Second

//go:embed web/waiting-room.html
var waitingRoomPage []byte

// errNoBroker answers the SSE route on an instance that runs no broker (--role dispatcher).
var errNoBroker = fmt.Errorf("this instance runs no broker: %w", ports.ErrUnavailable)

// pushHandlers serves the push mode's SSE stream and the waiting page.
type pushHandlers struct {
	broker       *appwaiting.Broker
	tokens       *Tokens
	writeTimeout time.Duration
	writers      *sseWriters
}

// accessTokenParameter is the query parameter queryToken reads.
const accessTokenParameter = "access_token"

// queryToken lets a request without an Authorization header authenticate with ?access_token=,
// for the SSE route and the page: browsers' EventSource cannot send headers.
func queryToken() gin.HandlerFunc {
	return func(c *gin.Context) {
		if token := c.Query(accessTokenParameter); token != "" && c.GetHeader("Authorization") == "" {
			c.Request.Header.Set("Authorization", "Bearer "+token)
		}
		c.Next()
	}
}

// page answers GET /events/{eventId}/waiting-room, to anyone: the page reads the event from its
// own URL and the token from its fragment, which it exchanges for a session.
func (h pushHandlers) page(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	c.Header("Content-Security-Policy", "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'")
	c.Data(stdhttp.StatusOK, "text/html; charset=utf-8", waitingRoomPage)
}

// startSession answers POST /events/{eventId}/waiting-room/session: the bearer token is
// exchanged for the event's session cookie, HttpOnly so no script reads it, SameSite=Strict so
// no other site sends it, scoped to the event's paths, Secure over TLS, and lasting no longer
// than the token.
func (h pushHandlers) startSession(c *gin.Context) {
	if !noBody(c) {
		return
	}
	eventID := c.Param("eventId")
	// No event is read (the page's next call, GET /events/{eventId}, says whether it exists), but
	// a cookie is never set for a path no event can have.
	if err := domain.ValidateUUID("eventId", eventID); err != nil {
		respondError(c, err)
		return
	}
	expires := expiry(c)
	maxAge := int(time.Until(expires) / time.Second)
	if maxAge < 1 { // the cookie would outlive the token by up to a second
		respondError(c, errUnauthorized.WithMessage("the bearer token has expired"))
		return
	}
	p := principal(c)
	session, err := h.tokens.sessions(eventID).mintUntil(p.UserID, p.Role, time.Now(), expires)
	if err != nil {
		respondError(c, err)
		return
	}
	stdhttp.SetCookie(c.Writer, &stdhttp.Cookie{
		Name:     SessionCookie,
		Value:    session,
		Path:     "/events/" + url.PathEscape(eventID),
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   c.Request.TLS != nil,
		SameSite: stdhttp.SameSiteStrictMode,
	})
	c.Header("Cache-Control", "no-store")
	c.Status(stdhttp.StatusNoContent)
}

// wait answers GET /events/{eventId}/tickets/waiting: it enters the queue and streams
// `position` events every tick, `admitted` with the entry token, and heartbeat comments, until
// the client leaves or the server shuts down. Once the user is in, the connection is taken
// over (sse.go says why): the response is HTTP/1.1 delimited by the connection's close.
func (h pushHandlers) wait(c *gin.Context) {
	if h.broker == nil {
		respondError(c, errNoBroker)
		return
	}
	// Only an HTTP/1 connection can be taken over: refuse any other before the user is queued.
	if c.Request.ProtoMajor != 1 {
		respondError(c, fmt.Errorf("the SSE route needs HTTP/1.1, got %s", c.Request.Proto))
		return
	}
	stream := newSSEStream(h.writers, h.writeTimeout)
	// The event's one copy of its id: the parameter is a slice of the whole request path, which
	// the held subscription would keep otherwise, and a copy per stream would cost one each.
	broker := h.broker
	sub, err := broker.Join(c.Request.Context(), unique.Make(c.Param("eventId")).Value(), principal(c).UserID, stream)
	if err != nil {
		respondError(c, err)
		return
	}
	started := false
	defer func() {
		if !started { // the user leaves on every path but the stream's, which leaves when it ends
			broker.Leave(sub)
		}
	}()
	// The request was read whole (a GET), so what net/http buffered is not needed.
	conn, _, err := stdhttp.NewResponseController(c.Writer).Hijack()
	if err != nil {
		respondError(c, fmt.Errorf("take over the SSE connection: %w", err))
		return
	}
	c.Status(stdhttp.StatusOK) // for the access log and metrics
	header := c.Writer.Header()
	header.Set("Content-Type", "text/event-stream")
	header.Set("Cache-Control", "no-store")
	header.Set("X-Accel-Buffering", "no")
	header.Set("Connection", "close")
	header.Set("Date", time.Now().UTC().Format(stdhttp.TimeFormat))
	var head bytes.Buffer
	head.WriteString("HTTP/1.1 200 OK\r\n")
	_ = header.Write(&head)
	head.WriteString("\r\n: connected\n\n")
	if err := writeWithin(conn, h.writeTimeout, head.Bytes()); err != nil {
		_ = conn.Close()
		return
	}
	started = true
	stream.start(conn, func() { broker.Leave(sub) })
}

// PushRoutes serves the push mode's SSE stream, and the waiting page of both modes with its
// session route; tokens sign the sessions. broker is nil on an instance that runs none, whose
// SSE route then answers 503; heartbeat is the period of the streams' comment lines,
// DefaultSSEHeartbeat when zero.
func PushRoutes(broker *appwaiting.Broker, tokens *Tokens, heartbeat time.Duration) Routes {
	if heartbeat <= 0 {
		heartbeat = DefaultSSEHeartbeat
	}
	h := pushHandlers{broker: broker, tokens: tokens, writeTimeout: sseWriteTimeout,
		writers: newSSEWriters(sseWriterLimit, heartbeat)}
	return func(g Groups) {
		g.Browser.GET("/events/:eventId/tickets/waiting", h.wait)
		g.Query.Take(stdhttp.MethodGet, "/events/:eventId/tickets/waiting", accessTokenParameter)
		g.Public.GET("/events/:eventId/waiting-room", h.page)
		// Its script reads ?access_token= of links made before the token moved to the fragment.
		g.Query.TakePage(stdhttp.MethodGet, "/events/:eventId/waiting-room", accessTokenParameter)
		g.API.POST("/events/:eventId/waiting-room/session", h.startSession)
	}
}
