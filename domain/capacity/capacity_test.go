package capacity_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rushgate/rushgate/domain/capacity"
)

var (
	errDuplicate = errors.New("duplicate")
	errExhausted = errors.New("exhausted")
)

// verdicts renders Allot's answer as one letter per claimant: G granted, D duplicate, X exhausted.
func verdicts(claimants []string, held map[string]bool, remaining int) string {
	out := ""
	for _, err := range capacity.Allot(claimants, held, remaining, errDuplicate, errExhausted) {
		switch {
		case err == nil:
			out += "G"
		case errors.Is(err, errDuplicate):
			out += "D"
		case errors.Is(err, errExhausted):
			out += "X"
		default:
			out += fmt.Sprintf("?%v", err)
		}
	}
	return out
}

func TestAllot_DecidesEachClaimAsIfAloneInOrder(t *testing.T) {
	cases := []struct {
		name      string
		claimants []string
		held      map[string]bool
		remaining int
		want      string
	}{
		{"room for all", []string{"a", "b", "c"}, nil, 5, "GGG"},
		{"exactly enough", []string{"a", "b"}, nil, 2, "GG"},
		{"first come first served", []string{"a", "b", "c", "d"}, nil, 2, "GGXX"},
		{"none left", []string{"a", "b"}, nil, 0, "XX"},
		{"a holder is refused and takes nothing", []string{"a", "b", "c"}, map[string]bool{"a": true}, 2, "DGG"},
		{"a claimant twice gets one", []string{"a", "a", "b"}, nil, 3, "GDG"},
		// Alone, the second claim of a refused claimant would be refused the same way.
		{"a refused claimant asking again is still out of luck", []string{"a", "b", "b"}, nil, 1, "GXX"},
		{"a holder is told so even when none are left", []string{"a", "b"}, map[string]bool{"b": true}, 1, "GD"},
		{"negative remaining grants nothing", []string{"a"}, nil, -1, "X"},
		{"no claimants", nil, nil, 3, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := verdicts(tc.claimants, tc.held, tc.remaining); got != tc.want {
				t.Fatalf("verdicts %q, want %q", got, tc.want)
			}
		})
	}
}
