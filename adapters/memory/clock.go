package memory

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.Clock   = (*Clock)(nil)
	_ ports.Sleeper = (*Sleeper)(nil)
)

// Clock is a ports.Clock that moves only when told to, so tests and simulations control TTLs,
// leases and backoff exactly. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock showing start (in UTC, truncated to microseconds like ports.Clock).
func NewClock(start time.Time) *Clock {
	return &Clock{now: start.UTC().Truncate(time.Microsecond)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Sleeper is a ports.Sleeper that advances its Clock instead of waiting and records every wait.
type Sleeper struct {
	clock *Clock
	mu    sync.Mutex
	waits []time.Duration
}

// NewSleeper returns a Sleeper that moves clock.
func NewSleeper(clock *Clock) *Sleeper { return &Sleeper{clock: clock} }

// Sleep records d and advances the clock by it, unless ctx is already done.
func (s *Sleeper) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	s.clock.Advance(d)
	return nil
}

// Waits returns the durations slept so far, in order.
func (s *Sleeper) Waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.waits)
}
