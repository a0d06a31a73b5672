package domain_test

import (
	"errors"
	"testing"

	"github.com/rushgate/rushgate/domain"
)

func TestPageLimit(t *testing.T) {
	for _, c := range []struct{ in, want int }{{0, 50}, {1, 1}, {500, 500}} {
		if got, err := domain.PageLimit(c.in); err != nil || got != c.want {
			t.Errorf("PageLimit(%d) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, in := range []int{-1, 501} {
		if _, err := domain.PageLimit(in); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("PageLimit(%d) = %v; want VALIDATION_FAILED", in, err)
		}
	}
}
