package commerce_test

import (
	"errors"
	"testing"

	"github.com/rushgate/rushgate/domain/commerce"
)

func TestArithmeticRefusesOverflow(t *testing.T) {
	const maxAmount = commerce.MaxAmount
	cases := []struct {
		name    string
		got     func() (int64, error)
		want    int64
		refused bool
	}{
		{"add", func() (int64, error) { return commerce.Add(2, 3) }, 5, false},
		{"add to the limit", func() (int64, error) { return commerce.Add(maxAmount-1, 1) }, maxAmount, false},
		{"add past the limit", func() (int64, error) { return commerce.Add(maxAmount, 1) }, 0, true},
		{"add a negative", func() (int64, error) { return commerce.Add(5, -1) }, 0, true},
		{"mul", func() (int64, error) { return commerce.Mul(10000, 5) }, 50000, false},
		{"mul by zero", func() (int64, error) { return commerce.Mul(maxAmount, 0) }, 0, false},
		{"mul past the limit", func() (int64, error) { return commerce.Mul(maxAmount/2+1, 2) }, 0, true},
		{"mul that would wrap int64", func() (int64, error) { return commerce.Mul(1<<40, 1<<40) }, 0, true},
		{"percent rounds down", func() (int64, error) { return commerce.Percent(999, 10) }, 99, false},
		{"percent of the limit", func() (int64, error) { return commerce.Percent(maxAmount, 100) }, maxAmount, false},
		{"percent over 100", func() (int64, error) { return commerce.Percent(100, 101) }, 0, true},
		{"sum", func() (int64, error) { return commerce.Sum(1, 2, 3) }, 6, false},
		{"sum past the limit", func() (int64, error) { return commerce.Sum(maxAmount, 0, 1) }, 0, true},
	}
	for _, c := range cases {
		got, err := c.got()
		if c.refused {
			if !errors.Is(err, commerce.ErrAmountOverflow) {
				t.Errorf("%s: got %d, %v; want AMOUNT_OVERFLOW", c.name, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got %d, %v; want %d", c.name, got, err, c.want)
		}
	}
}
