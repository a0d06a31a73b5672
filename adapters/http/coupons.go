package http

import (
	stdhttp "net/http"

	"github.com/gin-gonic/gin"

	appcoupon "github.com/rushgate/rushgate/application/coupon"
	"github.com/rushgate/rushgate/domain"
)

// couponHandlers serves the coupon routes.
type couponHandlers struct {
	coupons *appcoupon.Service
}

type createCouponRequest struct {
	Name          string `json:"name"`
	DiscountRate  int    `json:"discountRate"`
	TotalQuantity int    `json:"totalQuantity"`
	ExpiresAt     string `json:"expiresAt"`
}

// createCoupon answers POST /admin/coupons (admin).
func (h couponHandlers) createCoupon(c *gin.Context) {
	var req createCouponRequest
	if err := decodeJSON(c.Request, &req, false); err != nil {
		respondError(c, err)
		return
	}
	expiresAt, err := domain.ParseInstant("expiresAt", req.ExpiresAt)
	if err != nil {
		respondError(c, err)
		return
	}
	view, err := h.coupons.Create(c.Request.Context(), appcoupon.CreateCommand{
		Name:          req.Name,
		DiscountRate:  req.DiscountRate,
		TotalQuantity: req.TotalQuantity,
		ExpiresAt:     expiresAt,
	})
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusCreated, wireCoupon(view))
}

// issue answers POST /api/coupons/{couponId}/issue; an Idempotency-Key header is honoured but
// not required.
func (h couponHandlers) issue(c *gin.Context) {
	user, err := actingUser(c)
	if err != nil {
		respondError(c, err)
		return
	}
	res, err := h.coupons.Issue(c.Request.Context(), appcoupon.IssueCommand{
		CouponID:       c.Param("couponId"),
		UserID:         user,
		IdempotencyKey: c.GetHeader(IdempotencyKeyHeader),
	})
	respondGuarded(c, res, err, wireIssuedCoupon)
}

// CouponRoutes serves the coupons and their issue.
func CouponRoutes(coupons *appcoupon.Service) Routes {
	h := couponHandlers{coupons: coupons}
	return func(g Groups) {
		g.API.POST("/admin/coupons", requireRole(RoleAdmin), h.createCoupon)
		g.API.POST("/api/coupons/:couponId/issue", h.issue)
	}
}
