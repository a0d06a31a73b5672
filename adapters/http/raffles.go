package http

import (
	stdhttp "net/http"

	"github.com/gin-gonic/gin"

	appraffle "github.com/rushgate/rushgate/application/raffle"
	"github.com/rushgate/rushgate/domain"
)

// raffleHandlers serves the raffle routes.
type raffleHandlers struct {
	raffles *appraffle.Service
}

type createRaffleRequest struct {
	Name      string  `json:"name"`
	Winners   int     `json:"winners"`
	ClosesAt  string  `json:"closesAt"`
	ProductID *string `json:"productId"`
}

// create answers POST /admin/raffles.
func (h raffleHandlers) create(c *gin.Context) {
	var req createRaffleRequest
	if err := decodeJSON(c.Request, &req, false); err != nil {
		respondError(c, err)
		return
	}
	closesAt, err := domain.ParseInstant("closesAt", req.ClosesAt)
	if err != nil {
		respondError(c, err)
		return
	}
	cmd := appraffle.CreateCommand{Name: req.Name, Winners: req.Winners, ClosesAt: closesAt}
	if req.ProductID != nil {
		if *req.ProductID == "" {
			respondError(c, domain.Invalid("productId", "must be a product id when given"))
			return
		}
		cmd.ProductID = *req.ProductID
	}
	view, err := h.raffles.Create(c.Request.Context(), cmd)
	if err != nil {
		respondError(c, err)
		return
	}
	c.Header("Location", "/raffles/"+view.ID)
	writeJSON(c, stdhttp.StatusCreated, wireCreatedRaffle(view))
}

// get answers GET /raffles/{raffleId}.
func (h raffleHandlers) get(c *gin.Context) {
	view, err := h.raffles.Get(c.Request.Context(), c.Param("raffleId"))
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusOK, wireRaffle(view))
}

// enter answers POST /raffles/{raffleId}/entries: 201 for a new entry, 200 with the same entry
// for a user who had entered.
func (h raffleHandlers) enter(c *gin.Context) {
	user, err := actingUser(c)
	if err != nil {
		respondError(c, err)
		return
	}
	view, created, err := h.raffles.Enter(c.Request.Context(), c.Param("raffleId"), user)
	if err != nil {
		respondError(c, err)
		return
	}
	status := stdhttp.StatusOK
	if created {
		status = stdhttp.StatusCreated
	}
	writeJSON(c, status, wireRaffleEntry(view))
}

// standing answers GET /raffles/{raffleId}/entries/me.
func (h raffleHandlers) standing(c *gin.Context) {
	view, err := h.raffles.Standing(c.Request.Context(), c.Param("raffleId"), principal(c).UserID)
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusOK, wireRaffleStanding(view))
}

// RaffleRoutes serves the raffles.
func RaffleRoutes(raffles *appraffle.Service) Routes {
	h := raffleHandlers{raffles: raffles}
	return func(g Groups) {
		g.API.POST("/admin/raffles", requireRole(RoleAdmin), h.create)
		g.API.GET("/raffles/:raffleId", h.get)
		g.API.POST("/raffles/:raffleId/entries", h.enter)
		g.API.GET("/raffles/:raffleId/entries/me", h.standing)
	}
}
