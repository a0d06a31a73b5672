package ports

import (
	"context"
	"time"

	"github.com/rushgate/rushgate/domain/commerce/coupon"
)

// CouponRepository stores coupons.
//
// Get returns coupon.ErrNotFound for an unknown id. AddIssued raises the coupon's issued count by
// n in one optimistic statement, UPDATE ... SET issued = issued + n, version = version + 1 WHERE
// id = ? AND version = ? AND issued + n <= total: it applies only when the stored version still
// equals version and the total still covers n, and otherwise changes nothing and returns
// ErrVersionConflict (the caller re-reads the coupon and decides again). Of concurrent AddIssued
// calls with one version at most one applies.
type CouponRepository interface {
	Create(ctx context.Context, c *coupon.Coupon) error
	Get(ctx context.Context, id string) (*coupon.Coupon, error)
	AddIssued(ctx context.Context, id string, version int64, n int) error
}

// UserCouponRepository stores the coupons users hold.
//
// Add inserts user coupons in one statement, all or none. It enforces UNIQUE(userId, couponId)
// in storage and returns coupon.ErrAlreadyIssued, inserting none, when any pair exists, including
// when a concurrent transaction inserted it first; a user coupon of an unknown coupon is
// coupon.ErrNotFound. Existing returns which of userIDs hold a coupon of couponID, in one read.
// Count returns how many user coupons of couponID exist.
//
// Get returns the user's coupon of couponID with the coupon's discount rate and expiry, or
// coupon.ErrInvalid when the user holds none (order creation answers INVALID_COUPON then; check
// the rest with Held.CheckUsable). GetForUpdate does the same but must run inside TxRunner.InTx
// and locks the user coupon's row (not the coupon's) until that transaction ends, so a payment
// that redeems it excludes another. MarkUsed turns an AVAILABLE user coupon USED at usedAt in
// one conditional statement, or returns coupon.ErrInvalid, changing nothing, when it is unknown
// or not AVAILABLE: of concurrent MarkUsed calls on one user coupon at most one succeeds.
type UserCouponRepository interface {
	Add(ctx context.Context, userCoupons ...coupon.UserCoupon) error
	Existing(ctx context.Context, couponID string, userIDs []string) (map[string]bool, error)
	Count(ctx context.Context, couponID string) (int, error)
	Get(ctx context.Context, userID, couponID string) (coupon.Held, error)
	GetForUpdate(ctx context.Context, userID, couponID string) (coupon.Held, error)
	MarkUsed(ctx context.Context, userCouponID string, usedAt time.Time) error
}
