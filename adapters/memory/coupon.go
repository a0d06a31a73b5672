package memory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rushgate/rushgate/domain/commerce/coupon"
	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.CouponRepository     = (*CouponRepository)(nil)
	_ ports.UserCouponRepository = (*UserCouponRepository)(nil)
)

func couponKeyOf(c coupon.Coupon) string { return c.ID() }

var couponsTable = declareTable("coupons", couponKeyOf)

// userCouponKey is the unique key (couponId, userId) of a user coupon.
type userCouponKey struct {
	couponID, userID string
}

func userCouponKeyOf(uc coupon.UserCoupon) userCouponKey {
	return userCouponKey{uc.CouponID(), uc.UserID()}
}

var userCouponsTable = declarePartitionedTable("user_coupons", userCouponKeyOf, userCouponKey.coupon)

// coupon partitions the user coupons table by coupon, for Count.
func (k userCouponKey) coupon() string { return k.couponID }

// CouponRepository stores coupons in a Database.
type CouponRepository struct {
	db *Database
}

// NewCouponRepository returns a CouponRepository on d.
func NewCouponRepository(d *Database) *CouponRepository { return &CouponRepository{db: d} }

// Create inserts c; an existing id is a duplicate-key error.
func (r *CouponRepository) Create(ctx context.Context, c *coupon.Coupon) error {
	return r.db.run(ctx, func(t *tx) error {
		return couponsTable.in(r.db).insert(ctx, t, *c)
	})
}

// Get returns a copy of the coupon, or coupon.ErrNotFound.
func (r *CouponRepository) Get(ctx context.Context, id string) (*coupon.Coupon, error) {
	var found coupon.Coupon
	err := r.db.run(ctx, func(t *tx) error {
		c, ok := couponsTable.in(r.db).get(t, id)
		if !ok {
			return coupon.ErrNotFound
		}
		found = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &found, nil
}

// AddIssued is the optimistic UPDATE: under the coupon's row lock (an UPDATE takes it), it adds
// n to issued and bumps the version when the version still matches and the total covers n, and
// otherwise returns ports.ErrVersionConflict.
func (r *CouponRepository) AddIssued(ctx context.Context, id string, version int64, n int) error {
	return r.db.run(ctx, func(t *tx) error {
		c, ok, err := couponsTable.in(r.db).getForUpdate(ctx, t, id)
		if err != nil {
			return err
		}
		if !ok || c.Version() != version || c.IssuedQuantity()+n > c.TotalQuantity() {
			return ports.ErrVersionConflict
		}
		return couponsTable.in(r.db).put(ctx, t, *coupon.Rebuild(c.ID(), c.Name(), c.DiscountRate(), c.TotalQuantity(),
			c.IssuedQuantity()+n, c.Version()+1, c.ExpiresAt(), c.CreatedAt()))
	})
}

// UserCouponRepository stores user coupons in a Database.
type UserCouponRepository struct {
	db *Database
}

// NewUserCouponRepository returns a UserCouponRepository on d.
func NewUserCouponRepository(d *Database) *UserCouponRepository {
	return &UserCouponRepository{db: d}
}

// Add inserts user coupons in one statement, all or none. Like a UNIQUE index, it locks each
// (couponId, userId) key for the rest of the transaction, so a concurrent Add of the same pair
// waits and then fails with coupon.ErrAlreadyIssued if the other one commits. A user coupon of
// an unknown coupon violates the foreign key and wraps coupon.ErrNotFound.
func (r *UserCouponRepository) Add(ctx context.Context, userCoupons ...coupon.UserCoupon) error {
	if len(userCoupons) == 0 {
		return nil
	}
	return r.db.run(ctx, func(t *tx) error {
		for _, uc := range userCoupons {
			if _, ok := couponsTable.in(r.db).get(t, uc.CouponID()); !ok {
				return fmt.Errorf("memory: add user coupon %q: foreign key coupon %q: %w", uc.ID(), uc.CouponID(), coupon.ErrNotFound)
			}
		}
		err := userCouponsTable.in(r.db).insert(ctx, t, userCoupons...)
		if errors.Is(err, errDuplicateKey) {
			return coupon.ErrAlreadyIssued
		}
		return err
	})
}

// Existing returns which of userIDs hold a coupon of couponID.
func (r *UserCouponRepository) Existing(ctx context.Context, couponID string, userIDs []string) (map[string]bool, error) {
	existing := make(map[string]bool)
	err := r.db.run(ctx, func(t *tx) error {
		for _, userID := range userIDs {
			if _, ok := userCouponsTable.in(r.db).get(t, userCouponKey{couponID, userID}); ok {
				existing[userID] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return existing, nil
}

// Count returns the number of user coupons of couponID.
func (r *UserCouponRepository) Count(ctx context.Context, couponID string) (int, error) {
	var n int
	err := r.db.run(ctx, func(t *tx) error {
		n = len(userCouponsTable.in(r.db).rowsIn(t, couponID))
		return nil
	})
	return n, err
}

// Get returns the user's coupon of couponID with its coupon's terms, or coupon.ErrInvalid.
func (r *UserCouponRepository) Get(ctx context.Context, userID, couponID string) (coupon.Held, error) {
	var held coupon.Held
	err := r.db.run(ctx, func(t *tx) error {
		uc, ok := userCouponsTable.in(r.db).get(t, userCouponKey{couponID, userID})
		if !ok {
			return coupon.ErrInvalid
		}
		held = r.held(t, uc)
		return nil
	})
	return held, err
}

// GetForUpdate locks the user coupon's row until ctx's transaction ends, then returns it like
// Get. It fails outside InTx.
func (r *UserCouponRepository) GetForUpdate(ctx context.Context, userID, couponID string) (coupon.Held, error) {
	var held coupon.Held
	err := r.db.runInTx(ctx, func(t *tx) error {
		uc, ok, err := userCouponsTable.in(r.db).getForUpdate(ctx, t, userCouponKey{couponID, userID})
		if err != nil {
			return err
		}
		if !ok {
			return coupon.ErrInvalid
		}
		held = r.held(t, uc)
		return nil
	})
	return held, err
}

// held joins a user coupon with its coupon's terms; the foreign key guarantees the coupon.
func (r *UserCouponRepository) held(t *tx, uc coupon.UserCoupon) coupon.Held {
	c, _ := couponsTable.in(r.db).get(t, uc.CouponID())
	return coupon.Held{UserCoupon: uc, DiscountRate: c.DiscountRate(), ExpiresAt: c.ExpiresAt()}
}

// MarkUsed turns the AVAILABLE user coupon USED under its row lock, or returns
// coupon.ErrInvalid when it is unknown or not AVAILABLE.
func (r *UserCouponRepository) MarkUsed(ctx context.Context, userCouponID string, usedAt time.Time) error {
	return r.db.run(ctx, func(t *tx) error {
		// The id is a secondary key here: find the row, then lock it and read it again.
		found := userCouponsTable.in(r.db).filter(t, func(uc coupon.UserCoupon) bool { return uc.ID() == userCouponID })
		if len(found) == 0 {
			return coupon.ErrInvalid
		}
		uc, ok, err := userCouponsTable.in(r.db).getForUpdate(ctx, t, userCouponKeyOf(found[0]))
		if err != nil {
			return err
		}
		if !ok {
			return coupon.ErrInvalid
		}
		if err := uc.Use(usedAt); err != nil {
			return err
		}
		return userCouponsTable.in(r.db).put(ctx, t, uc)
	})
}
