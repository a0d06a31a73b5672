// Package system implements the ports backed by the operating system: the wall clock, timers
// and UUIDv7 identifiers; and it names the build running (ReadBuild).
package system

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.Clock       = Clock{}
	_ ports.Sleeper     = Sleeper{}
	_ ports.IDGenerator = UUIDs{}
)

// Clock is the wall clock in UTC, truncated to the microsecond precision both databases store.
type Clock struct{}

// Now returns the current time in UTC, truncated to microseconds.
func (Clock) Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// Sleeper waits on a real timer.
type Sleeper struct{}

// Sleep waits for d or until ctx is done, whichever comes first, returning ctx.Err() in the
// latter case. A non-positive d returns at once.
func (Sleeper) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// UUIDs generates UUIDv7 identifiers: unique and ordered by creation time.
type UUIDs struct{}

// NewID returns a new UUIDv7 string. It panics only if the system's random source fails.
func (UUIDs) NewID() string { return uuid.Must(uuid.NewV7()).String() }
