// Package coupon holds the first-come coupon use cases: create a coupon and issue it. Issuing
// is a hot key: the guard's lane serves the requests queued for one coupon in batches, each
// batch one transaction with one optimistic version check and one multi-row INSERT. It depends
// on ports only.
package coupon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce/coupon"
	"github.com/rushgate/rushgate/ports"
)

// DefaultIssueRetries is how many times the lane re-runs a batch after a version conflict when
// Config.IssueRetries is zero.
const DefaultIssueRetries = 3

// Config tunes the coupon use cases.
type Config struct {
	// IssueRetries bounds the re-runs of a batch whose optimistic increment found the coupon
	// changed (another instance issued meanwhile) before its requests hear COUPON_ISSUE_FAILED;
	// DefaultIssueRetries when zero. It is the lane's guard.LaneConfig.ConflictRetries.
	IssueRetries int
	// MaxBatch bounds how many issues of one coupon a lock hold serves in one transaction;
	// guard.DefaultMaxBatch when zero.
	MaxBatch int
}

// Deps are the ports and the guard the coupon use cases run on.
type Deps struct {
	Tx          ports.TxRunner
	Coupons     ports.CouponRepository
	UserCoupons ports.UserCouponRepository
	Guard       *guard.Guard
	Clock       ports.Clock
	IDs         ports.IDGenerator
}

// Service runs the coupon use cases.
type Service struct {
	tx          ports.TxRunner
	coupons     ports.CouponRepository
	userCoupons ports.UserCouponRepository
	clock       ports.Clock
	ids         ports.IDGenerator
	issues      *guard.Lane[issueInput, IssueResult]
	// soldOut holds the ids of coupons this instance saw sold out. Issued counts never go down,
	// so a sold-out coupon stays sold out and the hint needs no expiry.
	soldOut sync.Map
}

// NewService wires the coupon use cases to their ports.
func NewService(d Deps, cfg Config) *Service {
	if cfg.IssueRetries <= 0 {
		cfg.IssueRetries = DefaultIssueRetries
	}
	s := &Service{tx: d.Tx, coupons: d.Coupons, userCoupons: d.UserCoupons, clock: d.Clock, ids: d.IDs}
	// Markers: the UNIQUE index keeps a re-run from issuing twice, but only a marker committed
	// with the coupon answers a keyed retry whose record Redis lost with the first 201 rather
	// than ALREADY_ISSUED. The lane runs each attempt in a fresh transaction, as a retry after a
	// conflict needs (on MySQL a conflict is only seen anew from a fresh snapshot).
	s.issues = guard.NewLane(d.Guard, guard.LaneConfig{MaxBatch: cfg.MaxBatch, Markers: true,
		ConflictRetries: cfg.IssueRetries}, s.issueBatch)
	return s
}

// View is a coupon as clients see it.
type View struct {
	ID             string
	Name           string
	DiscountRate   int
	TotalQuantity  int
	IssuedQuantity int
	ExpiresAt      time.Time
}

// CreateCommand creates a coupon.
type CreateCommand struct {
	Name          string
	DiscountRate  int
	TotalQuantity int
	ExpiresAt     time.Time
}

// Create validates and stores a new coupon of which none is issued.
func (s *Service) Create(ctx context.Context, cmd CreateCommand) (View, error) {
	c, err := coupon.New(s.ids.NewID(), cmd.Name, cmd.DiscountRate, cmd.TotalQuantity, cmd.ExpiresAt.UTC(), s.clock.Now())
	if err != nil {
		return View{}, err
	}
	if err := s.coupons.Create(ctx, c); err != nil {
		return View{}, fmt.Errorf("create coupon: %w", err)
	}
	return View{ID: c.ID(), Name: c.Name(), DiscountRate: c.DiscountRate(), TotalQuantity: c.TotalQuantity(),
		IssuedQuantity: c.IssuedQuantity(), ExpiresAt: c.ExpiresAt()}, nil
}

// IssueCommand asks for one coupon of CouponID for UserID. IdempotencyKey is optional: issuing
// is not required to be idempotent (the UNIQUE user coupon already keeps it once per user), but
// a client that sends a key gets its first answer replayed.
type IssueCommand struct {
	CouponID       string
	UserID         string
	IdempotencyKey string
}

// IssueResult is the answer to a successful issue.
type IssueResult struct {
	UserCouponID      string
	CouponName        string
	DiscountRate      int
	ExpiresAt         time.Time
	RemainingQuantity int
}

// issueInput is one issue waiting in its coupon's lane.
type issueInput struct {
	couponID, userID string
}

// Issue gives the user one coupon under the lock coupon:{couponId}, whose holder
// issues every request queued behind it in one transaction (issueBatch); with an
// Idempotency-Key, through the guard's idempotency too. A coupon this instance saw sold out is
// answered at once. Fails with coupon.ErrNotFound, coupon.ErrExpired, coupon.ErrSoldOut,
// coupon.ErrAlreadyIssued, or coupon.ErrIssueFailed when the optimistic increment kept
// conflicting through every retry.
func (s *Service) Issue(ctx context.Context, cmd IssueCommand) (guard.Result[IssueResult], error) {
	if err := domain.ValidateUUID("couponId", cmd.CouponID); err != nil {
		return guard.Result[IssueResult]{}, err
	}
	if err := domain.ValidateUserID("userId", cmd.UserID); err != nil {
		return guard.Result[IssueResult]{}, err
	}
	lockKey := "coupon:" + cmd.CouponID
	in := issueInput{couponID: cmd.CouponID, userID: cmd.UserID}
	if cmd.IdempotencyKey == "" {
		if err := s.rejectEarly(ctx, cmd.CouponID, cmd.UserID); err != nil {
			return guard.Result[IssueResult]{}, err
		}
		value, err := s.issues.Do(ctx, lockKey, nil, in)
		return guard.Result[IssueResult]{Value: value, Outcome: guard.OutcomeCreated}, err
	}
	req := guard.Request{
		UserID:         cmd.UserID,
		IdempotencyKey: cmd.IdempotencyKey,
		Fingerprint:    guard.Fingerprint("coupon.issue", []string{cmd.CouponID}, nil),
		LockKey:        lockKey,
		Outcome:        guard.OutcomeCreated,
		Precheck: func(ctx context.Context) error {
			err := s.rejectEarly(ctx, cmd.CouponID, cmd.UserID)
			if errors.Is(err, coupon.ErrAlreadyIssued) {
				// The holder's keyed retry may be the issue itself, its answer lost with the
				// idempotency store's record: the lane answers it from the marker committed
				// with the coupon, or ALREADY_ISSUED.
				return nil
			}
			return err
		},
	}
	return s.issues.Run(ctx, req, in)
}

// rejectEarly answers an issue of a coupon this instance saw sold out without queueing for the
// lock: once the coupon is gone, the rest of the herd hears COUPON_SOLD_OUT at once, and a
// holder asking again ALREADY_ISSUED, as under the lock.
func (s *Service) rejectEarly(ctx context.Context, couponID, userID string) error {
	if _, soldOut := s.soldOut.Load(couponID); !soldOut {
		return nil
	}
	held, err := s.userCoupons.Existing(ctx, couponID, []string{userID})
	if err != nil {
		return fmt.Errorf("check user coupon: %w", err)
	}
	if held[userID] {
		return coupon.ErrAlreadyIssued
	}
	return coupon.ErrSoldOut
}

// issueBatch issues a batch of requests for one coupon in one transaction: read the coupon,
// one read of which users already hold it, issue coupons in queue order while they last (the
// rest hear COUPON_SOLD_OUT; a holder, or a user twice in the batch, ALREADY_ISSUED), then one
// optimistic UPDATE raising issued by the number issued and one multi-row INSERT. A version
// conflict (another instance issued meanwhile) rolls the batch back and fails it with
// COUPON_ISSUE_FAILED, which the lane re-runs in a fresh transaction up to the configured
// retries before the whole batch hears it. A duplicate from the INSERT (a race the lock missed)
// rolls the batch back, restoring issued with it, and fails the batch, which the guard then
// re-runs one request at a time.
func (s *Service) issueBatch(ctx context.Context, batch []issueInput) ([]guard.Answer[IssueResult], error) {
	couponID := batch[0].couponID
	answers := make([]guard.Answer[IssueResult], len(batch))
	soldOut := false
	err := s.tx.InTx(ctx, func(ctx context.Context) error {
		clear(answers)
		soldOut = false
		return s.issueOnce(ctx, couponID, batch, answers, &soldOut)
	})
	if errors.Is(err, ports.ErrVersionConflict) {
		return nil, fmt.Errorf("%w: %w", err, coupon.ErrIssueFailed)
	}
	if err != nil {
		return nil, err
	}
	if soldOut {
		// Learnt from committed state only, so the hint never refuses a coupon that exists.
		s.soldOut.Store(couponID, true)
	}
	return answers, nil
}

// issueOnce is issueBatch's transaction: it fills answers, sets soldOut when the coupon has
// none left once it commits, and returns ports.ErrVersionConflict when the coupon changed
// since it was read.
func (s *Service) issueOnce(ctx context.Context, couponID string, batch []issueInput, answers []guard.Answer[IssueResult], soldOut *bool) error {
	c, err := s.coupons.Get(ctx, couponID)
	if err != nil {
		if errors.Is(err, coupon.ErrNotFound) {
			answerAll(answers, coupon.ErrNotFound)
			return nil
		}
		return err
	}
	now := s.clock.Now()
	if c.ExpiredAt(now) {
		answerAll(answers, coupon.ErrExpired)
		return nil
	}
	userIDs := make([]string, len(batch))
	for i, in := range batch {
		userIDs[i] = in.userID
	}
	held, err := s.userCoupons.Existing(ctx, couponID, userIDs)
	if err != nil {
		return fmt.Errorf("check user coupons: %w", err)
	}
	issued, verdicts := c.IssueAll(userIDs, held, now, s.ids.NewID)
	next := 0
	for i := range batch {
		if answers[i].Err = verdicts[i]; answers[i].Err != nil {
			continue
		}
		uc := issued[next]
		next++
		// The quantity left right after this user's coupon, as if issued one by one.
		answers[i].Value = IssueResult{UserCouponID: uc.ID(), CouponName: c.Name(), DiscountRate: c.DiscountRate(),
			ExpiresAt: c.ExpiresAt(), RemainingQuantity: c.Remaining() - next}
	}
	*soldOut = len(issued) == c.Remaining()
	if len(issued) == 0 {
		return nil
	}
	if err := s.coupons.AddIssued(ctx, couponID, c.Version(), len(issued)); err != nil {
		return err
	}
	if err := s.userCoupons.Add(ctx, issued...); err != nil {
		return err
	}
	return nil
}

// answerAll gives every request of a batch the same rejection.
func answerAll(answers []guard.Answer[IssueResult], err error) {
	for i := range answers {
		answers[i].Err = err
	}
}
