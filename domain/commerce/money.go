// Package commerce holds what the commerce modules share: money in integer minor units with
// arithmetic that refuses to overflow. Users and points, coupons, products and stock, carts and
// orders live in its subpackages.
package commerce

import (
	"github.com/rushgate/rushgate/domain"
)

// MaxAmount bounds every amount rushgate stores or computes (balances, prices, totals): far
// above any real price, far below int64's limit, and exact in a JSON number (2^53).
const MaxAmount int64 = 1 << 53

// ErrAmountOverflow refuses arithmetic whose result would leave [0, MaxAmount].
var ErrAmountOverflow = domain.NewError(domain.KindInvalid, "AMOUNT_OVERFLOW", "the amount is out of the range rushgate can hold")

// Add returns a + b, or ErrAmountOverflow when the sum leaves [0, MaxAmount].
func Add(a, b int64) (int64, error) {
	if a < 0 || b < 0 || a > MaxAmount-b {
		return 0, ErrAmountOverflow
	}
	return a + b, nil
}

// Mul returns amount × n (a unit price times a quantity), or ErrAmountOverflow when the product
// leaves [0, MaxAmount].
func Mul(amount int64, n int64) (int64, error) {
	if amount < 0 || n < 0 || (n != 0 && amount > MaxAmount/n) {
		return 0, ErrAmountOverflow
	}
	return amount * n, nil
}

// Percent returns rate% of amount rounded down (a discount never exceeds its rate), for rate in
// 0..100.
func Percent(amount int64, rate int) (int64, error) {
	if amount < 0 || amount > MaxAmount || rate < 0 || rate > 100 {
		return 0, ErrAmountOverflow
	}
	// amount ≤ 2^53 and rate ≤ 100 keep amount × rate below 2^60: no overflow.
	return amount * int64(rate) / 100, nil
}

// Sum adds amounts, or fails with ErrAmountOverflow.
func Sum(amounts ...int64) (int64, error) {
	var total int64
	for _, a := range amounts {
		var err error
		if total, err = Add(total, a); err != nil {
			return 0, err
		}
	}
	return total, nil
}
