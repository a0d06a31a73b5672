package http

import (
	stdhttp "net/http"

	"github.com/gin-gonic/gin"

	appwaiting "github.com/rushgate/rushgate/application/waiting"
	"github.com/rushgate/rushgate/domain"
)

// EntryTokenHeader carries the entry token of a seat reservation.
const EntryTokenHeader = "Entry-Token"

// eventHandlers serves the waiting-room and seat routes.
type eventHandlers struct {
	events *appwaiting.Service
}

type createEventRequest struct {
	Name     string  `json:"name"`
	Seats    int     `json:"seats"`
	Slots    *int    `json:"slots"`
	Mode     string  `json:"mode"`
	TokenTTL *string `json:"tokenTtl"`
	OpensAt  *string `json:"opensAt"`
	Prequeue *string `json:"prequeue"`
}

// create answers POST /admin/events.
func (h eventHandlers) create(c *gin.Context) {
	var req createEventRequest
	if err := decodeJSON(c.Request, &req, false); err != nil {
		respondError(c, err)
		return
	}
	cmd := appwaiting.CreateEventCommand{Name: req.Name, Seats: req.Seats, Mode: req.Mode}
	if req.Slots != nil {
		if *req.Slots < 1 {
			respondError(c, domain.Invalid("slots", "must be at least 1 when given"))
			return
		}
		cmd.Slots = *req.Slots
	}
	if req.TokenTTL != nil {
		if *req.TokenTTL == "" {
			respondError(c, domain.Invalid("tokenTtl", "must be a duration such as 5m when given"))
			return
		}
		cmd.TokenTTL = *req.TokenTTL
	}
	if req.OpensAt != nil {
		if *req.OpensAt == "" {
			respondError(c, domain.Invalid("opensAt", "must be an RFC 3339 time when given"))
			return
		}
		cmd.OpensAt = *req.OpensAt
	}
	if req.Prequeue != nil {
		if *req.Prequeue == "" {
			respondError(c, domain.Invalid("prequeue", `must be "shuffle" or "fifo" when given`))
			return
		}
		cmd.Prequeue = *req.Prequeue
	}
	view, err := h.events.CreateEvent(c.Request.Context(), cmd)
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusCreated, wireEvent(view))
}

type patchEventRequest struct {
	Slots *int `json:"slots"`
}

// patch answers PATCH /admin/events/{eventId} {slots}.
func (h eventHandlers) patch(c *gin.Context) {
	var req patchEventRequest
	if err := decodeJSON(c.Request, &req, false); err != nil {
		respondError(c, err)
		return
	}
	if req.Slots == nil {
		respondError(c, domain.Invalid("slots", "is required"))
		return
	}
	view, err := h.events.SetSlots(c.Request.Context(), c.Param("eventId"), *req.Slots)
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusOK, wireEvent(view))
}

// get answers GET /events/{eventId} (any user).
func (h eventHandlers) get(c *gin.Context) {
	view, err := h.events.Event(c.Request.Context(), c.Param("eventId"))
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusOK, wirePublicEvent(view))
}

// queue answers GET /admin/events/{eventId}/queue.
func (h eventHandlers) queue(c *gin.Context) {
	view, err := h.events.Queue(c.Request.Context(), c.Param("eventId"))
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusOK, wireQueue(view))
}

// seats answers GET /events/{eventId}/seats?limit=&cursor=.
func (h eventHandlers) seats(c *gin.Context) {
	query, err := pageQuery(c)
	if err != nil {
		respondError(c, err)
		return
	}
	page, err := h.events.ListSeats(c.Request.Context(), c.Param("eventId"), query.limit, query.cursor)
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusOK, wireSeatPage(page))
}

// noBody refuses a body on a route that takes none: only an empty body or {} is accepted.
func noBody(c *gin.Context) bool {
	if err := decodeJSON(c.Request, &struct{}{}, true); err != nil {
		respondError(c, err)
		return false
	}
	return true
}

// enter answers POST /events/{eventId}/queue: 201 on a first entry, 200 with the same place
// on a repeated one.
func (h eventHandlers) enter(c *gin.Context) {
	if !noBody(c) {
		return
	}
	view, created, err := h.events.Enter(c.Request.Context(), c.Param("eventId"), principal(c).UserID)
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, createdOrOK(created), wireQueueStatus(view))
}

// status answers GET /events/{eventId}/queue/status.
func (h eventHandlers) status(c *gin.Context) {
	view, err := h.events.Status(c.Request.Context(), c.Param("eventId"), principal(c).UserID)
	if err != nil {
		respondError(c, err)
		return
	}
	if view.Status == appwaiting.StatusSoldOut {
		writeJSON(c, stdhttp.StatusOK, soldOutJSON{Status: view.Status})
		return
	}
	writeJSON(c, stdhttp.StatusOK, wireQueueStatus(view))
}

// claim answers POST /events/{eventId}/queue/token: 201 with a new token, 200 with the one
// already held.
func (h eventHandlers) claim(c *gin.Context) {
	if !noBody(c) {
		return
	}
	view, created, err := h.events.Claim(c.Request.Context(), c.Param("eventId"), principal(c).UserID)
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, createdOrOK(created), wireEntryToken(view))
}

// giveBack answers DELETE /events/{eventId}/queue/token: 204, also when no token is held.
func (h eventHandlers) giveBack(c *gin.Context) {
	if !noBody(c) {
		return
	}
	if err := h.events.Return(c.Request.Context(), c.Param("eventId"), principal(c).UserID); err != nil {
		respondError(c, err)
		return
	}
	c.Status(stdhttp.StatusNoContent)
}

// leave answers DELETE /events/{eventId}/queue: 204, also when the user was not in the line.
func (h eventHandlers) leave(c *gin.Context) {
	if !noBody(c) {
		return
	}
	if err := h.events.Leave(c.Request.Context(), c.Param("eventId"), principal(c).UserID); err != nil {
		respondError(c, err)
		return
	}
	c.Status(stdhttp.StatusNoContent)
}

// reserve answers POST /events/{eventId}/seats/{seatId}/reservations with the Entry-Token
// header.
func (h eventHandlers) reserve(c *gin.Context) {
	if !noBody(c) {
		return
	}
	view, err := h.events.Reserve(c.Request.Context(), appwaiting.ReserveCommand{
		EventID: c.Param("eventId"),
		SeatID:  c.Param("seatId"),
		UserID:  principal(c).UserID,
		Token:   c.GetHeader(EntryTokenHeader),
	})
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusCreated, wireReservation(view))
}

func createdOrOK(created bool) int {
	if created {
		return stdhttp.StatusCreated
	}
	return stdhttp.StatusOK
}

// EventRoutes serves the events, their seats and the pull mode of their waiting rooms.
func EventRoutes(events *appwaiting.Service) Routes {
	h := eventHandlers{events: events}
	return func(g Groups) {
		g.API.POST("/admin/events", requireRole(RoleAdmin), h.create)
		g.API.PATCH("/admin/events/:eventId", requireRole(RoleAdmin), h.patch)
		g.API.GET("/admin/events/:eventId/queue", requireRole(RoleAdmin), h.queue)
		g.Event.GET("/events/:eventId", h.get)
		g.Event.GET("/events/:eventId/seats", h.seats)
		g.Query.Take(stdhttp.MethodGet, "/events/:eventId/seats", pageParameters...)
		g.Event.POST("/events/:eventId/seats/:seatId/reservations", h.reserve)
		g.Event.POST("/events/:eventId/queue", h.enter)
		g.Event.DELETE("/events/:eventId/queue", h.leave)
		g.Event.GET("/events/:eventId/queue/status", h.status)
		g.Event.POST("/events/:eventId/queue/token", h.claim)
		g.Event.DELETE("/events/:eventId/queue/token", h.giveBack)
	}
}
