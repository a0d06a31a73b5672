package coupon_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain/commerce/coupon"
)

var now = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

func TestCoupon_RemainingAndExpiry(t *testing.T) {
	c := coupon.Rebuild("c1", "10% off", 10, 5, 3, 7, now.Add(time.Hour), now)
	if c.Remaining() != 2 {
		t.Fatalf("remaining %d", c.Remaining())
	}
	if c.ExpiredAt(now.Add(time.Hour-time.Microsecond)) || !c.ExpiredAt(now.Add(time.Hour)) {
		t.Fatal("a coupon is valid strictly before expiresAt")
	}
	uc := c.Issue("uc1", "alice", now)
	if uc != (coupon.UserCoupon{ID: "uc1", UserID: "alice", CouponID: "c1", Status: coupon.Available, IssuedAt: now}) {
		t.Fatalf("issued %+v", uc)
	}
}

func TestCoupon_IssueAllIssuesInOrderWhileItLasts(t *testing.T) {
	c := coupon.Rebuild("c1", "10% off", 10, 5, 3, 7, now.Add(time.Hour), now)
	n := 0
	newID := func() string { n++; return fmt.Sprintf("uc%d", n) }
	issued, verdicts := c.IssueAll([]string{"alice", "bob", "bob", "carol", "dave"}, map[string]bool{"alice": true}, now, newID)
	want := []error{coupon.ErrAlreadyIssued, nil, coupon.ErrAlreadyIssued, nil, coupon.ErrSoldOut}
	for i, err := range verdicts {
		if !errors.Is(err, want[i]) { // errors.Is(err, nil) holds only for a nil err
			t.Fatalf("verdicts %v, want %v", verdicts, want)
		}
	}
	wantIssued := []coupon.UserCoupon{
		{ID: "uc1", UserID: "bob", CouponID: "c1", Status: coupon.Available, IssuedAt: now},
		{ID: "uc2", UserID: "carol", CouponID: "c1", Status: coupon.Available, IssuedAt: now},
	}
	if fmt.Sprint(issued) != fmt.Sprint(wantIssued) {
		t.Fatalf("issued %+v, want %+v", issued, wantIssued)
	}
}

func TestHeld_CheckUsable(t *testing.T) {
	usedAt := now
	for _, tc := range []struct {
		name string
		held coupon.Held
		want error
	}{
		{"available", coupon.Held{UserCoupon: coupon.UserCoupon{Status: coupon.Available}, ExpiresAt: now.Add(time.Second)}, nil},
		{"used", coupon.Held{UserCoupon: coupon.UserCoupon{Status: coupon.Used, UsedAt: &usedAt}, ExpiresAt: now.Add(time.Second)}, coupon.ErrInvalid},
		{"expired", coupon.Held{UserCoupon: coupon.UserCoupon{Status: coupon.Available}, ExpiresAt: now}, coupon.ErrInvalid},
	} {
		if err := tc.held.CheckUsable(now); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
