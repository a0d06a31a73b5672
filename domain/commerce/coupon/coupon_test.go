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
	if uc.ID() != "uc1" || uc.UserID() != "alice" || uc.CouponID() != "c1" || uc.Status() != coupon.Available ||
		!uc.IssuedAt().Equal(now) || uc.UsedAt() != nil {
		t.Fatalf("issued %+v", uc)
	}
}

// expiresAt is kept to the microsecond the databases store, in UTC: the answer to the create
// shows what every later read shows.
func TestNew_KeepsExpiresAtToTheMicrosecond(t *testing.T) {
	given := now.Add(time.Hour + 123456789*time.Nanosecond).In(time.FixedZone("KST", 9*3600))
	c, err := coupon.New("c1", "10% off", 10, 5, given, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := now.Add(time.Hour + 123456*time.Microsecond); c.ExpiresAt() != want {
		t.Fatalf("expiresAt %v, want %v", c.ExpiresAt(), want)
	}
}

func TestUserCoupon_UsedOnce(t *testing.T) {
	uc := coupon.Rebuild("c1", "10% off", 10, 5, 0, 0, now.Add(time.Hour), now).Issue("uc1", "alice", now)
	usedAt := now.Add(time.Minute)
	if err := uc.Use(usedAt); err != nil || uc.Status() != coupon.Used || !uc.UsedAt().Equal(usedAt) {
		t.Fatalf("first use: %v, %+v", err, uc)
	}
	if err := uc.Use(usedAt.Add(time.Minute)); !errors.Is(err, coupon.ErrInvalid) || !uc.UsedAt().Equal(usedAt) {
		t.Fatalf("second use: %v, used at %v", err, uc.UsedAt())
	}
	*uc.UsedAt() = time.Time{}
	if !uc.UsedAt().Equal(usedAt) {
		t.Fatal("UsedAt must return a copy")
	}
	stored := usedAt
	rebuilt := coupon.RebuildUserCoupon("uc1", "alice", "c1", coupon.Used, now, &stored)
	stored = time.Time{}
	if !rebuilt.UsedAt().Equal(usedAt) {
		t.Fatal("RebuildUserCoupon must copy usedAt")
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
	var got []string
	for _, uc := range issued {
		got = append(got, fmt.Sprintf("%s %s %s %s %v", uc.ID(), uc.UserID(), uc.CouponID(), uc.Status(), uc.IssuedAt().Equal(now)))
	}
	if want := []string{"uc1 bob c1 AVAILABLE true", "uc2 carol c1 AVAILABLE true"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("issued %v, want %v", got, want)
	}
}

func TestHeld_CheckUsable(t *testing.T) {
	usedAt := now
	available := coupon.RebuildUserCoupon("uc1", "alice", "c1", coupon.Available, now, nil)
	used := coupon.RebuildUserCoupon("uc1", "alice", "c1", coupon.Used, now, &usedAt)
	for _, tc := range []struct {
		name string
		held coupon.Held
		want error
	}{
		{"available", coupon.Held{UserCoupon: available, ExpiresAt: now.Add(time.Second)}, nil},
		{"used", coupon.Held{UserCoupon: used, ExpiresAt: now.Add(time.Second)}, coupon.ErrInvalid},
		{"expired", coupon.Held{UserCoupon: available, ExpiresAt: now}, coupon.ErrInvalid},
	} {
		if err := tc.held.CheckUsable(now); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
