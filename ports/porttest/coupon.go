package porttest

import (
	"context"

	"fmt"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain/commerce/coupon"
	"github.com/rushgate/rushgate/ports"
)

// TestCouponRepositories checks ports.CouponRepository and ports.UserCouponRepository: Create
// and Get round-trip a coupon and an unknown id is coupon.ErrNotFound; AddIssued applies only on
// the current version and within the total, bumps the version, and of concurrent calls with one
// version exactly one applies; Add inserts a batch all or none, reports an existing pair as
// coupon.ErrAlreadyIssued (also to the losers of a concurrent race) and an unknown coupon as
// coupon.ErrNotFound; a failed Add rolls back the issued count raised in its transaction;
// Existing and Count see exactly what was added; Get and GetForUpdate return the coupon's terms
// or coupon.ErrInvalid, GetForUpdate fails outside a transaction; MarkUsed succeeds once.
func TestCouponRepositories(t *testing.T, newStores func(t *testing.T) ports.Stores, caps Capabilities) {
	run(t, newStores, caps, []testCase[ports.Stores]{
		{"Coupon/CreateThenGetRoundTrips", testCouponCreateThenGet},
		{"Coupon/UnknownIDIsNotFound", testCouponUnknownIsNotFound},
		{"Coupon/AddIssuedChecksVersionAndTotal", testCouponAddIssuedChecks},
		{"Coupon/ConcurrentAddIssuedOfOneVersionOneApplies", testCouponConcurrentAddIssued},
		{"UserCoupon/AddThenExistingCountAndGet", testUserCouponAddThenRead},
		{"UserCoupon/AddWithAnExistingPairInsertsNone", testUserCouponAddWithExistingPair},
		{"UserCoupon/AddOfUnknownCouponIsNotFound", testUserCouponAddOfUnknownCoupon},
		{"UserCoupon/ConcurrentAddsOfOnePairOneWins", testUserCouponConcurrentAdds},
		{"UserCoupon/FailedAddRollsBackTheIssuedCount", testUserCouponFailedAddRollsBack},
		{"UserCoupon/GetOfNoneIsInvalid", testUserCouponGetOfNone},
		{"UserCoupon/GetForUpdateOutsideTxFails", testUserCouponGetForUpdateOutsideTx},
		{"UserCoupon/ConcurrentMarkUsedOneWins", testUserCouponConcurrentMarkUsed},
	})
}

// createCoupon stores a new coupon with a random id and the given total.
func createCoupon(t *testing.T, s ports.Stores, total int) *coupon.Coupon {
	t.Helper()
	c, err := coupon.New(randomID(), "contract coupon", 10, total, now().Add(time.Hour), now())
	must(t, err, "new coupon")
	must(t, s.Coupons.Create(context.Background(), c), "create coupon")
	return c
}

func getCoupon(t *testing.T, s ports.Stores, id string) *coupon.Coupon {
	t.Helper()
	c, err := s.Coupons.Get(context.Background(), id)
	must(t, err, "get coupon")
	return c
}

func testCouponCreateThenGet(t *testing.T, e env[ports.Stores]) {
	c := createCoupon(t, e.impl, 5)
	got := getCoupon(t, e.impl, c.ID())
	expectEqual(t, *got, *c, "stored coupon")
}

func testCouponUnknownIsNotFound(t *testing.T, e env[ports.Stores]) {
	_, err := e.impl.Coupons.Get(context.Background(), randomID())
	expectIs(t, err, coupon.ErrNotFound, "get unknown")
}

func testCouponAddIssuedChecks(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c := createCoupon(t, e.impl, 3)
	must(t, e.impl.Coupons.AddIssued(ctx, c.ID(), c.Version(), 2), "add 2 on the current version")
	got := getCoupon(t, e.impl, c.ID())
	expectEqual(t, got.IssuedQuantity(), 2, "issued")
	expectEqual(t, got.Version(), c.Version()+1, "version")
	expectIs(t, e.impl.Coupons.AddIssued(ctx, c.ID(), c.Version(), 1), ports.ErrVersionConflict, "add on a stale version")
	expectIs(t, e.impl.Coupons.AddIssued(ctx, c.ID(), got.Version(), 2), ports.ErrVersionConflict, "add beyond the total")
	expectIs(t, e.impl.Coupons.AddIssued(ctx, randomID(), 0, 1), ports.ErrVersionConflict, "add to an unknown coupon")
	expectEqual(t, *getCoupon(t, e.impl, c.ID()), *got, "coupon after refused adds")
}

func testCouponConcurrentAddIssued(t *testing.T, e env[ports.Stores]) {
	c := createCoupon(t, e.impl, 100)
	errs := startTogether(20, func(int) error {
		return e.impl.Coupons.AddIssued(context.Background(), c.ID(), c.Version(), 1)
	})
	expectOneWinner(t, errs, ports.ErrVersionConflict)
	expectEqual(t, getCoupon(t, e.impl, c.ID()).IssuedQuantity(), 1, "issued")
}

func issueTo(c *coupon.Coupon, userID string) coupon.UserCoupon {
	return c.Issue(randomID(), userID, now())
}

// describeHeld spells out every field of h, for comparing what storage read back.
func describeHeld(h coupon.Held) string {
	return fmt.Sprintf("%s %s %s %s %v %v %d %v", h.ID(), h.UserID(), h.CouponID(), h.Status(), h.IssuedAt(), h.UsedAt(),
		h.DiscountRate, h.ExpiresAt)
}

func testUserCouponAddThenRead(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c := createCoupon(t, e.impl, 5)
	a, b := issueTo(c, newUserID()), issueTo(c, newUserID())
	must(t, e.impl.UserCoupons.Add(ctx, a, b), "add two")
	existing, err := e.impl.UserCoupons.Existing(ctx, c.ID(), []string{a.UserID(), newUserID()})
	must(t, err, "existing")
	expectEqual(t, fmt.Sprint(existing), fmt.Sprint(map[string]bool{a.UserID(): true}), "existing")
	n, err := e.impl.UserCoupons.Count(ctx, c.ID())
	must(t, err, "count")
	expectEqual(t, n, 2, "count")
	held, err := e.impl.UserCoupons.Get(ctx, b.UserID(), c.ID())
	must(t, err, "get")
	want := coupon.Held{UserCoupon: b, DiscountRate: c.DiscountRate(), ExpiresAt: c.ExpiresAt()}
	expectEqual(t, describeHeld(held), describeHeld(want), "held")
	must(t, e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
		locked, err := e.impl.UserCoupons.GetForUpdate(ctx, b.UserID(), c.ID())
		expectEqual(t, describeHeld(locked), describeHeld(want), "held for update")
		return err
	}), "get for update")
}

func testUserCouponAddWithExistingPair(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c := createCoupon(t, e.impl, 5)
	first := issueTo(c, newUserID())
	must(t, e.impl.UserCoupons.Add(ctx, first), "add")
	fresh := issueTo(c, newUserID())
	expectIs(t, e.impl.UserCoupons.Add(ctx, fresh, issueTo(c, first.UserID())), coupon.ErrAlreadyIssued, "add with an existing pair")
	n, err := e.impl.UserCoupons.Count(ctx, c.ID())
	must(t, err, "count")
	expectEqual(t, n, 1, "count after the refused batch")
}

func testUserCouponAddOfUnknownCoupon(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	ghost := coupon.Rebuild(randomID(), "ghost", 10, 1, 0, 0, now().Add(time.Hour), now())
	expectIs(t, e.impl.UserCoupons.Add(ctx, issueTo(ghost, newUserID())), coupon.ErrNotFound, "add of unknown coupon")
}

func testUserCouponConcurrentAdds(t *testing.T, e env[ports.Stores]) {
	c := createCoupon(t, e.impl, 5)
	userID := newUserID()
	errs := startTogether(10, func(int) error {
		return e.impl.UserCoupons.Add(context.Background(), issueTo(c, userID))
	})
	expectOneWinner(t, errs, coupon.ErrAlreadyIssued)
}

func testUserCouponFailedAddRollsBack(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c := createCoupon(t, e.impl, 5)
	first := issueTo(c, newUserID())
	must(t, e.impl.UserCoupons.Add(ctx, first), "add")
	err := e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
		if err := e.impl.Coupons.AddIssued(ctx, c.ID(), c.Version(), 1); err != nil {
			return err
		}
		return e.impl.UserCoupons.Add(ctx, issueTo(c, first.UserID()))
	})
	expectIs(t, err, coupon.ErrAlreadyIssued, "issue twice")
	got := getCoupon(t, e.impl, c.ID())
	expectEqual(t, got.IssuedQuantity(), 0, "issued after the rollback")
	expectEqual(t, got.Version(), c.Version(), "version after the rollback")
}

func testUserCouponGetOfNone(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c := createCoupon(t, e.impl, 5)
	_, err := e.impl.UserCoupons.Get(ctx, newUserID(), c.ID())
	expectIs(t, err, coupon.ErrInvalid, "get of a coupon not held")
	err = e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
		_, err := e.impl.UserCoupons.GetForUpdate(ctx, newUserID(), randomID())
		return err
	})
	expectIs(t, err, coupon.ErrInvalid, "get for update of an unknown coupon")
}

func testUserCouponGetForUpdateOutsideTx(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c := createCoupon(t, e.impl, 5)
	uc := issueTo(c, newUserID())
	must(t, e.impl.UserCoupons.Add(ctx, uc), "add")
	if _, err := e.impl.UserCoupons.GetForUpdate(ctx, uc.UserID(), c.ID()); err == nil {
		t.Error("GetForUpdate outside a transaction succeeded")
	}
}

func testUserCouponConcurrentMarkUsed(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c := createCoupon(t, e.impl, 5)
	uc := issueTo(c, newUserID())
	must(t, e.impl.UserCoupons.Add(ctx, uc), "add")
	usedAt := now()
	errs := startTogether(10, func(int) error { return e.impl.UserCoupons.MarkUsed(ctx, uc.ID(), usedAt) })
	expectOneWinner(t, errs, coupon.ErrInvalid)
	held, err := e.impl.UserCoupons.Get(ctx, uc.UserID(), c.ID())
	must(t, err, "get")
	if held.Status() != coupon.Used || held.UsedAt() == nil || !held.UsedAt().Equal(usedAt) {
		t.Errorf("after MarkUsed: %s, want USED at %v", describeHeld(held), usedAt)
	}
	expectIs(t, held.CheckUsable(now()), coupon.ErrInvalid, "a used coupon is usable")
	expectIs(t, e.impl.UserCoupons.MarkUsed(ctx, randomID(), usedAt), coupon.ErrInvalid, "mark an unknown user coupon")
}
