package http

import (
	stdhttp "net/http"

	"github.com/gin-gonic/gin"

	appcrew "github.com/rushgate/rushgate/application/crew"
)

// Headers of the idempotency protocol.
const (
	IdempotencyKeyHeader     = "Idempotency-Key"
	IdempotentReplayedHeader = "Idempotent-Replayed"
)

// crewHandlers serves the crew routes.
type crewHandlers struct {
	crews *appcrew.Service
}

type createCrewRequest struct {
	Name       string `json:"name"`
	MaxMembers int    `json:"maxMembers"`
}

// create answers POST /crews (admin).
func (h crewHandlers) create(c *gin.Context) {
	var req createCrewRequest
	if err := decodeJSON(c.Request, &req, false); err != nil {
		respondError(c, err)
		return
	}
	view, err := h.crews.Create(c.Request.Context(), appcrew.CreateCommand{Name: req.Name, MaxMembers: req.MaxMembers})
	if err != nil {
		respondError(c, err)
		return
	}
	c.Header("Location", "/crews/"+view.ID)
	writeJSON(c, stdhttp.StatusCreated, wireCrew(view))
}

// get answers GET /crews/{crewId}.
func (h crewHandlers) get(c *gin.Context) {
	view, err := h.crews.Get(c.Request.Context(), c.Param("crewId"))
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusOK, wireCrew(view))
}

// listMembers answers GET /crews/{crewId}/members?limit=&cursor=.
func (h crewHandlers) listMembers(c *gin.Context) {
	query, err := pageQuery(c)
	if err != nil {
		respondError(c, err)
		return
	}
	page, err := h.crews.ListMembers(c.Request.Context(), c.Param("crewId"), query.limit, query.cursor)
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusOK, wireMemberPage(page))
}

// join answers POST /crews/{crewId}/join, guarded by the Idempotency-Key header.
func (h crewHandlers) join(c *gin.Context) {
	user, err := actingUser(c)
	if err != nil {
		respondError(c, err)
		return
	}
	res, err := h.crews.Join(c.Request.Context(), appcrew.JoinCommand{
		CrewID:         c.Param("crewId"),
		UserID:         user,
		IdempotencyKey: c.GetHeader(IdempotencyKeyHeader),
	})
	respondGuarded(c, res, err, wireJoin)
}

// leave answers DELETE /crews/{crewId}/members/me.
func (h crewHandlers) leave(c *gin.Context) {
	if !noBody(c) {
		return
	}
	err := h.crews.Leave(c.Request.Context(), appcrew.LeaveCommand{CrewID: c.Param("crewId"), UserID: principal(c).UserID})
	if err != nil {
		respondError(c, err)
		return
	}
	c.Status(stdhttp.StatusNoContent)
}

// CrewRoutes serves the crews.
func CrewRoutes(crews *appcrew.Service) Routes {
	h := crewHandlers{crews: crews}
	return func(g Groups) {
		g.API.POST("/crews", requireRole(RoleAdmin), h.create)
		g.API.GET("/crews/:crewId", h.get)
		g.API.GET("/crews/:crewId/members", h.listMembers)
		g.Query.Take(stdhttp.MethodGet, "/crews/:crewId/members", pageParameters...)
		g.API.POST("/crews/:crewId/join", h.join)
		g.API.DELETE("/crews/:crewId/members/me", h.leave)
	}
}
