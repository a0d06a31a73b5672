package http

import (
	"bytes"
	stdhttp "net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/go-json-experiment/json/jsontext"

	appwallet "github.com/rushgate/rushgate/application/wallet"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce/wallet"
)

// walletHandlers serves the users and points routes.
type walletHandlers struct {
	wallets *appwallet.Service
}

type createUserRequest struct {
	ID      string `json:"id"`
	Balance *int64 `json:"balance"`
}

// createUser answers POST /admin/users (admin).
func (h walletHandlers) createUser(c *gin.Context) {
	var req createUserRequest
	if err := decodeJSON(c.Request, &req, false); err != nil {
		respondError(c, err)
		return
	}
	if req.Balance == nil {
		respondError(c, domain.Invalid("balance", "is required"))
		return
	}
	user, err := h.wallets.CreateUser(c.Request.Context(), appwallet.CreateUserCommand{ID: req.ID, Balance: *req.Balance})
	if err != nil {
		respondError(c, err)
		return
	}
	// A user id may hold '/', '?', '#' or '%': escaped, it stays one path segment.
	c.Header("Location", "/api/users/"+url.PathEscape(user.ID)+"/balance")
	writeJSON(c, stdhttp.StatusCreated, wireUser(user))
}

// balance answers GET /api/users/{userId}/balance, for that user or an admin.
func (h walletHandlers) balance(c *gin.Context) {
	userID := c.Param("userId")
	if p := principal(c); p.UserID != userID && p.Role != RoleAdmin {
		respondError(c, errForbidden)
		return
	}
	b, err := h.wallets.GetBalance(c.Request.Context(), userID)
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusOK, wireBalance(b))
}

// chargeRequest holds the amount undecoded: a number that is not an integer in range is
// INVALID_AMOUNT, while a missing amount or one of another JSON type is VALIDATION_FAILED.
type chargeRequest struct {
	Amount jsontext.Value `json:"amount"`
}

// charge answers POST /api/users/{userId}/balance/charge for the authenticated user only,
// guarded by the Idempotency-Key header.
func (h walletHandlers) charge(c *gin.Context) {
	userID := c.Param("userId")
	if principal(c).UserID != userID {
		respondError(c, errForbidden)
		return
	}
	var req chargeRequest
	if err := decodeJSON(c.Request, &req, false); err != nil {
		respondError(c, err)
		return
	}
	amount, err := chargeAmount(req.Amount)
	if err != nil {
		respondError(c, err)
		return
	}
	res, err := h.wallets.Charge(c.Request.Context(), appwallet.ChargeCommand{
		UserID:         userID,
		Amount:         amount,
		IdempotencyKey: c.GetHeader(IdempotencyKeyHeader),
	})
	respondGuarded(c, res, err, wireCharge)
}

// chargeAmount reads a charge's amount: a JSON number written as an integer that fits int64
// (the service bounds it further), else wallet.ErrInvalidAmount; not a number at all is
// VALIDATION_FAILED naming amount.
func chargeAmount(raw jsontext.Value) (int64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, domain.Invalid("amount", "is required")
	}
	if first := raw[0]; first != '-' && (first < '0' || first > '9') {
		return 0, domain.Invalid("amount", "must be a number")
	}
	amount, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		// A fraction, an exponent or more than int64 holds: a number, but not a valid amount.
		return 0, wallet.ErrInvalidAmount
	}
	return amount, nil
}

// WalletRoutes serves the users' points balances.
func WalletRoutes(wallets *appwallet.Service) Routes {
	h := walletHandlers{wallets: wallets}
	return func(g Groups) {
		g.API.POST("/admin/users", requireRole(RoleAdmin), h.createUser)
		g.API.GET("/api/users/:userId/balance", h.balance)
		g.API.POST("/api/users/:userId/balance/charge", h.charge)
	}
}
