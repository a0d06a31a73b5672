package testkit

import (
	"context"
	"sync"
	"time"
)

// Deadlines records the deadline of the context each call of a port received, by the call's
// name, for a test that wraps a port to read how long its calls were allowed to take rather than
// wait for them to run out. Its zero value is ready; it is safe for concurrent use.
type Deadlines struct {
	mu sync.Mutex
	by map[string]time.Time // zero: called without a deadline
}

// Record records ctx's deadline for call (the last one counts).
func (d *Deadlines) Record(ctx context.Context, call string) {
	deadline, _ := ctx.Deadline()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.by == nil {
		d.by = map[string]time.Time{}
	}
	d.by[call] = deadline
}

// Of is the deadline call last received, and whether it was called.
func (d *Deadlines) Of(call string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	deadline, called := d.by[call]
	return deadline, called
}
