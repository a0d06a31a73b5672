package guard

import (
	"context"
	"sync/atomic"
	"time"
)

// Budget is one request's time on the database, its timeout in all: the reads it makes before
// its lane (Spend) and its batch's transaction, retries included (Request.Budget), share it, as
// a dependency's timeout bounds one request however many steps it takes. Only the database
// work spends it: the request's wait in the lane's queue and for the lock does not, so a
// contender that waits in vain still answers the lane's Busy error, never a timeout, and
// neither does what the request does between (an idempotency record, a storage check). A nil
// Budget bounds nothing.
type Budget struct {
	left atomic.Int64 // nanoseconds
}

// NewBudget returns a budget of total; nil (no bound) when total is not positive.
func NewBudget(total time.Duration) *Budget {
	if total <= 0 {
		return nil
	}
	b := &Budget{}
	b.left.Store(int64(total))
	return b
}

// Spend returns ctx bounded by what is left of b, and spent, which charges b the time since:
// call it as soon as the database work is done.
func (b *Budget) Spend(ctx context.Context) (_ context.Context, spent func()) {
	if b == nil {
		return ctx, func() {}
	}
	start := time.Now()
	ctx, cancel := context.WithDeadline(ctx, b.deadline(start))
	return ctx, func() {
		cancel()
		b.left.Add(-int64(time.Since(start)))
	}
}

// deadline is when b runs out for work that starts at start.
func (b *Budget) deadline(start time.Time) time.Time {
	return start.Add(time.Duration(b.left.Load()))
}
