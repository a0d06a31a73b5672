package testkit

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Deadlines records the deadline of the context each call of a port received, by the call's
// name, for a test that wraps a port to read how long its calls were allowed to take rather than
// wait for them to run out. Its zero value is ready; it is safe for concurrent use.
type Deadlines struct {
	mu sync.Mutex
	by map[string]time.Time // zero: called without a deadline
}

// Record records ctx's deadline for call. Of several calls of one name the loosest counts (no
// deadline is the loosest), so that an assertion holds for each of them.
func (d *Deadlines) Record(ctx context.Context, call string) {
	deadline, _ := ctx.Deadline()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.by == nil {
		d.by = map[string]time.Time{}
	}
	if recorded, ok := d.by[call]; !ok || looser(deadline, recorded) {
		d.by[call] = deadline
	}
}

// looser reports whether deadline a bounds a call less than b does; none bounds it least.
func looser(a, b time.Time) bool { return !b.IsZero() && (a.IsZero() || a.After(b)) }

// AssertOneTimeoutFromArrival fails t unless each of calls was made, with a deadline timeout
// after the arrival of the request that made it, sent at sent and answered at answered: the
// calls shared one timeout counted from the arrival rather than taking one each.
func (d *Deadlines) AssertOneTimeoutFromArrival(t testing.TB, timeout time.Duration, sent, answered time.Time, calls ...string) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, call := range calls {
		deadline, called := d.by[call]
		if !called || deadline.Before(sent.Add(timeout)) || deadline.After(answered.Add(timeout)) {
			t.Errorf("%s (called %v) ran until %v, want its request's arrival (%v–%v) + %v", call, called, deadline, sent, answered, timeout)
		}
	}
}
