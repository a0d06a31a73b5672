// Package coupon is the first-come coupon: a limited quantity issued one per user, and the user
// coupons an order applies and a payment redeems.
package coupon

import (
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/capacity"
)

// Bounds of a coupon.
const (
	MinDiscountRate  = 1
	MaxDiscountRate  = 100
	MinTotalQuantity = 1
	MaxTotalQuantity = 10_000_000
	MaxNameLength    = 200
)

var (
	ErrNotFound      = domain.NewError(domain.KindNotFound, "COUPON_NOT_FOUND", "coupon not found")
	ErrSoldOut       = domain.NewError(domain.KindConflict, "COUPON_SOLD_OUT", "the coupon is sold out")
	ErrExpired       = domain.NewError(domain.KindConflict, "COUPON_EXPIRED", "the coupon has expired and is no longer issued")
	ErrAlreadyIssued = domain.NewError(domain.KindConflict, "ALREADY_ISSUED", "the user already holds this coupon")
	ErrIssueFailed   = domain.NewError(domain.KindConflict, "COUPON_ISSUE_FAILED", "the coupon could not be issued because of concurrent requests; retry")
	// ErrInvalid refuses a coupon an order or payment names: the user holds none of it, or holds
	// one that is used or expired.
	ErrInvalid = domain.NewError(domain.KindInvalid, "INVALID_COUPON", "the coupon is not held by the user, already used or expired")
)

// Coupon is a first-come coupon. Its invariant issuedQuantity ≤ totalQuantity is kept by the
// optimistic write that raises issuedQuantity (ports.CouponRepository.AddIssued), whose version
// check makes concurrent writers conflict instead of over-issuing.
type Coupon struct {
	id             string
	name           string
	discountRate   int
	totalQuantity  int
	issuedQuantity int
	version        int64
	expiresAt      time.Time
	createdAt      time.Time
}

// New validates and creates a coupon of which none is issued yet.
func New(id, name string, discountRate, totalQuantity int, expiresAt, now time.Time) (*Coupon, error) {
	if err := domain.ValidateText("name", name, MaxNameLength); err != nil {
		return nil, err
	}
	if discountRate < MinDiscountRate || discountRate > MaxDiscountRate {
		return nil, domain.Invalid("discountRate", "must be between %d and %d", MinDiscountRate, MaxDiscountRate)
	}
	if totalQuantity < MinTotalQuantity || totalQuantity > MaxTotalQuantity {
		return nil, domain.Invalid("totalQuantity", "must be between %d and %d", MinTotalQuantity, MaxTotalQuantity)
	}
	if err := domain.ValidateInstant("expiresAt", expiresAt); err != nil {
		return nil, err
	}
	// Kept to the microsecond, the databases' resolution, so every answer shows the one stored.
	expiresAt = expiresAt.UTC().Truncate(time.Microsecond)
	if !expiresAt.After(now) {
		return nil, domain.Invalid("expiresAt", "must be in the future")
	}
	return &Coupon{id: id, name: name, discountRate: discountRate, totalQuantity: totalQuantity,
		expiresAt: expiresAt, createdAt: now}, nil
}

// Rebuild restores a coupon from storage without re-validating; adapters only.
func Rebuild(id, name string, discountRate, totalQuantity, issuedQuantity int, version int64, expiresAt, createdAt time.Time) *Coupon {
	return &Coupon{id: id, name: name, discountRate: discountRate, totalQuantity: totalQuantity,
		issuedQuantity: issuedQuantity, version: version, expiresAt: expiresAt, createdAt: createdAt}
}

func (c *Coupon) ID() string           { return c.id }
func (c *Coupon) Name() string         { return c.name }
func (c *Coupon) DiscountRate() int    { return c.discountRate }
func (c *Coupon) TotalQuantity() int   { return c.totalQuantity }
func (c *Coupon) IssuedQuantity() int  { return c.issuedQuantity }
func (c *Coupon) Version() int64       { return c.version }
func (c *Coupon) ExpiresAt() time.Time { return c.expiresAt }
func (c *Coupon) CreatedAt() time.Time { return c.createdAt }

// Remaining is how many coupons are left to issue.
func (c *Coupon) Remaining() int { return c.totalQuantity - c.issuedQuantity }

// ExpiredAt reports whether the coupon has expired at now: it is valid strictly before
// expiresAt.
func (c *Coupon) ExpiredAt(now time.Time) bool { return !now.Before(c.expiresAt) }

// Status is a user coupon's state.
type Status string

// User coupon states.
const (
	Available Status = "AVAILABLE"
	Used      Status = "USED"
)

// UserCoupon is one user's copy of a coupon; (userID, couponID) is unique. It is AVAILABLE
// from issue until a payment uses it, once.
type UserCoupon struct {
	id       string
	userID   string
	couponID string
	status   Status
	issuedAt time.Time
	usedAt   *time.Time // set once status is Used
}

// Issue returns the AVAILABLE user coupon of c for userID.
func (c *Coupon) Issue(id, userID string, now time.Time) UserCoupon {
	return UserCoupon{id: id, userID: userID, couponID: c.id, status: Available, issuedAt: now}
}

// RebuildUserCoupon restores a user coupon from storage without re-validating; adapters only.
func RebuildUserCoupon(id, userID, couponID string, status Status, issuedAt time.Time, usedAt *time.Time) UserCoupon {
	uc := UserCoupon{id: id, userID: userID, couponID: couponID, status: status, issuedAt: issuedAt}
	if usedAt != nil {
		at := *usedAt
		uc.usedAt = &at
	}
	return uc
}

func (uc UserCoupon) ID() string          { return uc.id }
func (uc UserCoupon) UserID() string      { return uc.userID }
func (uc UserCoupon) CouponID() string    { return uc.couponID }
func (uc UserCoupon) Status() Status      { return uc.status }
func (uc UserCoupon) IssuedAt() time.Time { return uc.issuedAt }

// UsedAt is when a payment used the coupon, nil while it is AVAILABLE; a copy, so the caller
// cannot change the user coupon through it.
func (uc UserCoupon) UsedAt() *time.Time {
	if uc.usedAt == nil {
		return nil
	}
	at := *uc.usedAt
	return &at
}

// Use marks an AVAILABLE user coupon USED at now, or returns ErrInvalid and leaves it
// unchanged.
func (uc *UserCoupon) Use(now time.Time) error {
	if uc.status != Available {
		return ErrInvalid
	}
	uc.status, uc.usedAt = Used, &now
	return nil
}

// IssueAll issues one user coupon to each of userIDs in order while the coupon lasts, each as
// if issued alone: a user among held (the users who hold one already) or issued one earlier in
// the call fails with ErrAlreadyIssued, a user past the remaining quantity with ErrSoldOut. Each
// coupon issued takes its id from newID. It returns the user coupons issued, in order, and one
// verdict per user: nil when issued, else its refusal. Raising issuedQuantity is the optimistic
// write's (ports.CouponRepository.AddIssued), by len of the coupons issued.
func (c *Coupon) IssueAll(userIDs []string, held map[string]bool, now time.Time, newID func() string) ([]UserCoupon, []error) {
	verdicts := capacity.Allot(userIDs, held, c.Remaining(), ErrAlreadyIssued, ErrSoldOut)
	var issued []UserCoupon
	for i, userID := range userIDs {
		if verdicts[i] == nil {
			issued = append(issued, c.Issue(newID(), userID, now))
		}
	}
	return issued, verdicts
}

// Held is a user coupon with the terms of its coupon: what order creation validates and
// payment redeems.
type Held struct {
	UserCoupon
	DiscountRate int
	ExpiresAt    time.Time
}

// CheckUsable returns ErrInvalid unless the coupon is AVAILABLE and unexpired at now.
func (h Held) CheckUsable(now time.Time) error {
	if h.Status() != Available || !now.Before(h.ExpiresAt) {
		return ErrInvalid
	}
	return nil
}
