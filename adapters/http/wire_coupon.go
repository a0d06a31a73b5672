package http

import (
	"time"

	appcoupon "github.com/rushgate/rushgate/application/coupon"
)

type couponJSON struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	DiscountRate   int       `json:"discountRate"`
	TotalQuantity  int       `json:"totalQuantity"`
	IssuedQuantity int       `json:"issuedQuantity"`
	ExpiresAt      time.Time `json:"expiresAt"`
}

func wireCoupon(v appcoupon.View) couponJSON { return couponJSON(v) }

type issuedCouponJSON struct {
	UserCouponID      string    `json:"userCouponId"`
	CouponName        string    `json:"couponName"`
	DiscountRate      int       `json:"discountRate"`
	ExpiresAt         time.Time `json:"expiresAt"`
	RemainingQuantity int       `json:"remainingQuantity"`
}

func wireIssuedCoupon(v appcoupon.IssueResult) issuedCouponJSON { return issuedCouponJSON(v) }
