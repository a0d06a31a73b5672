package gormdb

import (
	"context"
	"database/sql"
	"time"

	"github.com/rushgate/rushgate/domain/commerce/coupon"
	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.CouponRepository     = (*CouponRepository)(nil)
	_ ports.UserCouponRepository = (*UserCouponRepository)(nil)
)

// couponRow is a row of the coupons table.
type couponRow struct {
	ID             string    `gorm:"column:id;primaryKey"`
	Name           string    `gorm:"column:name"`
	DiscountRate   int       `gorm:"column:discount_rate"`
	TotalQuantity  int       `gorm:"column:total_quantity"`
	IssuedQuantity int       `gorm:"column:issued_quantity"`
	Version        int64     `gorm:"column:version"`
	ExpiresAt      time.Time `gorm:"column:expires_at"`
	CreatedAt      time.Time `gorm:"column:created_at;autoCreateTime:false"`
}

func (couponRow) TableName() string { return "coupons" }

// CouponRepository stores coupons; it implements ports.CouponRepository.
type CouponRepository struct {
	db *DB
	// Hand-written hot statements (see statement.go), bound to db's dialect once.
	getSQL, addIssuedSQL string
}

// NewCouponRepository returns the coupon repository of db.
func NewCouponRepository(db *DB) *CouponRepository {
	return &CouponRepository{
		db: db,
		getSQL: Bind(db.dialect, "SELECT id, name, discount_rate, total_quantity, issued_quantity, version, expires_at, created_at "+
			"FROM coupons WHERE id = ?"),
		addIssuedSQL: Bind(db.dialect, "UPDATE coupons SET issued_quantity = issued_quantity + ?, version = version + 1 "+
			"WHERE id = ? AND version = ? AND issued_quantity + ? <= total_quantity"),
	}
}

// Create inserts a new coupon.
func (r *CouponRepository) Create(ctx context.Context, c *coupon.Coupon) error {
	s, done := r.db.session(ctx)
	defer done()
	row := couponRow{ID: c.ID(), Name: c.Name(), DiscountRate: c.DiscountRate(), TotalQuantity: c.TotalQuantity(),
		IssuedQuantity: c.IssuedQuantity(), Version: c.Version(), ExpiresAt: c.ExpiresAt().UTC(), CreatedAt: c.CreatedAt().UTC()}
	return translate(s.Create(&row).Error, errorMeanings{op: "create coupon"})
}

// Get returns the coupon, or coupon.ErrNotFound.
func (r *CouponRepository) Get(ctx context.Context, id string) (*coupon.Coupon, error) {
	var found *coupon.Coupon
	err := r.db.query(ctx, errorMeanings{op: "get coupon"}, r.getSQL, []any{id}, func(rows *sql.Rows) error {
		var c couponRow
		if err := rows.Scan(&c.ID, &c.Name, &c.DiscountRate, &c.TotalQuantity, &c.IssuedQuantity, &c.Version,
			&c.ExpiresAt, &c.CreatedAt); err != nil {
			return err
		}
		found = coupon.Rebuild(c.ID, c.Name, c.DiscountRate, c.TotalQuantity, c.IssuedQuantity, c.Version,
			c.ExpiresAt.UTC(), c.CreatedAt.UTC())
		return nil
	})
	if err != nil {
		return nil, err
	}
	if found == nil {
		return nil, coupon.ErrNotFound
	}
	return found, nil
}

// AddIssued runs the optimistic UPDATE; no row updated is ports.ErrVersionConflict. Every
// applied update changes the version, so MySQL's affected-rows count (changed rows) is exact.
func (r *CouponRepository) AddIssued(ctx context.Context, id string, version int64, n int) error {
	updated, err := r.db.exec(ctx, errorMeanings{op: "add issued coupons"}, r.addIssuedSQL, n, id, version, n)
	if err != nil {
		return err
	}
	if updated == 0 {
		return ports.ErrVersionConflict
	}
	return nil
}

// UserCouponRepository stores the coupons users hold; it implements ports.UserCouponRepository.
type UserCouponRepository struct {
	db *DB
	// Hand-written statements (see statement.go), bound to db's dialect once.
	getSQL, getForUpdateSQL, termsSQL, markUsedSQL, countSQL string
}

// NewUserCouponRepository returns the user coupon repository of db.
func NewUserCouponRepository(db *DB) *UserCouponRepository {
	const get = "SELECT id, user_id, coupon_id, status, issued_at, used_at FROM user_coupons WHERE user_id = ? AND coupon_id = ?"
	return &UserCouponRepository{
		db:              db,
		getSQL:          Bind(db.dialect, get),
		getForUpdateSQL: Bind(db.dialect, get+" FOR UPDATE"),
		termsSQL:        Bind(db.dialect, "SELECT discount_rate, expires_at FROM coupons WHERE id = ?"),
		markUsedSQL:     Bind(db.dialect, "UPDATE user_coupons SET status = 'USED', used_at = ? WHERE id = ? AND status = 'AVAILABLE'"),
		countSQL:        Bind(db.dialect, "SELECT COUNT(*) FROM user_coupons WHERE coupon_id = ?"),
	}
}

// Add inserts the user coupons in one multi-row INSERT, so the database applies all or none.
// The UNIQUE (user_id, coupon_id) index rejects the statement with coupon.ErrAlreadyIssued when
// any pair exists, even one a concurrent transaction inserted first; a user coupon of an
// unknown coupon is coupon.ErrNotFound. A call carries at most 10,922 user coupons (six
// parameters each, and both databases take at most 65,535 per statement).
func (r *UserCouponRepository) Add(ctx context.Context, userCoupons ...coupon.UserCoupon) error {
	if len(userCoupons) == 0 {
		return nil
	}
	query := Bind(r.db.dialect, "INSERT INTO user_coupons (id, user_id, coupon_id, status, issued_at, used_at) VALUES "+
		tuples(len(userCoupons), 6))
	args := make([]any, 0, 6*len(userCoupons))
	for _, uc := range userCoupons {
		var usedAt any
		if at := uc.UsedAt(); at != nil {
			usedAt = at.UTC()
		}
		args = append(args, uc.ID(), uc.UserID(), uc.CouponID(), string(uc.Status()), uc.IssuedAt().UTC(), usedAt)
	}
	_, err := r.db.exec(ctx, errorMeanings{
		op:        "add user coupons",
		notFound:  coupon.ErrNotFound,
		duplicate: coupon.ErrAlreadyIssued,
	}, query, args...)
	return err
}

// Existing returns which of userIDs hold a coupon of couponID, in one SELECT on the unique index.
func (r *UserCouponRepository) Existing(ctx context.Context, couponID string, userIDs []string) (map[string]bool, error) {
	return r.db.usersAmong(ctx, "find existing user coupons", "user_coupons", "coupon_id", couponID, userIDs)
}

// Count returns the number of user coupons of couponID.
func (r *UserCouponRepository) Count(ctx context.Context, couponID string) (int, error) {
	var n int
	err := r.db.query(ctx, errorMeanings{op: "count user coupons"}, r.countSQL, []any{couponID}, func(rows *sql.Rows) error {
		return rows.Scan(&n)
	})
	return n, err
}

// Get returns the user's coupon of couponID with its coupon's terms, or coupon.ErrInvalid.
func (r *UserCouponRepository) Get(ctx context.Context, userID, couponID string) (coupon.Held, error) {
	return r.held(ctx, r.getSQL, userID, couponID)
}

// GetForUpdate reads the user coupon with SELECT ... FOR UPDATE, locking its row (and only its
// row: the coupon's terms are read by a second, plain SELECT, so a payment never blocks issuing)
// until the transaction in ctx ends. Outside TxRunner.InTx it fails.
func (r *UserCouponRepository) GetForUpdate(ctx context.Context, userID, couponID string) (coupon.Held, error) {
	if _, ok := r.db.transaction(ctx); !ok {
		return coupon.Held{}, errNoTransaction
	}
	return r.held(ctx, r.getForUpdateSQL, userID, couponID)
}

// held reads a user coupon with query, then its coupon's terms.
func (r *UserCouponRepository) held(ctx context.Context, query, userID, couponID string) (coupon.Held, error) {
	var (
		h     coupon.Held
		found bool
	)
	err := r.db.query(ctx, errorMeanings{op: "get user coupon"}, query, []any{userID, couponID}, func(rows *sql.Rows) error {
		var (
			id, userID, couponID, status string
			issuedAt                     time.Time
			usedAt                       sql.NullTime
			used                         *time.Time
		)
		if err := rows.Scan(&id, &userID, &couponID, &status, &issuedAt, &usedAt); err != nil {
			return err
		}
		found = true
		if usedAt.Valid {
			at := usedAt.Time.UTC()
			used = &at
		}
		h.UserCoupon = coupon.RebuildUserCoupon(id, userID, couponID, coupon.Status(status), issuedAt.UTC(), used)
		return nil
	})
	if err != nil {
		return coupon.Held{}, err
	}
	if !found {
		return coupon.Held{}, coupon.ErrInvalid
	}
	err = r.db.query(ctx, errorMeanings{op: "get coupon terms"}, r.termsSQL, []any{couponID}, func(rows *sql.Rows) error {
		return rows.Scan(&h.DiscountRate, &h.ExpiresAt)
	})
	h.ExpiresAt = h.ExpiresAt.UTC()
	return h, err
}

// MarkUsed turns an AVAILABLE user coupon USED in one conditional UPDATE; no row updated is
// coupon.ErrInvalid.
func (r *UserCouponRepository) MarkUsed(ctx context.Context, userCouponID string, usedAt time.Time) error {
	updated, err := r.db.exec(ctx, errorMeanings{op: "mark user coupon used"}, r.markUsedSQL, usedAt.UTC(), userCouponID)
	if err != nil {
		return err
	}
	if updated == 0 {
		return coupon.ErrInvalid
	}
	return nil
}
