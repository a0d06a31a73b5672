package redis

import (
	"context"
	"errors"
	"net"
	"time"
)

// The waits between the tries of undoLater: the first soon, for a blip, then doubling up to a
// second, so many undos waiting on a Redis that stays frozen cost it little once it is back.
const (
	undoFirstWait = 50 * time.Millisecond
	undoMaxWait   = time.Second
)

// undoLater runs undo in the background, after a command failed with cause, until it succeeds
// or within has passed (undoUntil). A command whose answer was lost (Redis frozen, a caller's
// deadline) may still run once Redis answers again, and leave a lock or an idempotency record
// that nobody owns until it expires; undo removes it only while it is still the caller's, so
// running it when the command never ran, or again, is harmless. A command that cannot have
// reached Redis (the connection was refused) has nothing to undo.
func undoLater(cause error, within time.Duration, undo func(ctx context.Context) error) {
	if !mayHaveRun(cause) || within <= 0 {
		return
	}
	go undoUntil(time.Now().Add(within), undo)
}

// undoUntil tries undo until it succeeds, or until the next try would start after deadline.
// Each try is bounded by the client's call timeout, and none outlives deadline.
func undoUntil(deadline time.Time, undo func(ctx context.Context) error) {
	for wait := undoFirstWait; ; wait = min(2*wait, undoMaxWait) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		err := undo(ctx)
		cancel()
		if err == nil || time.Until(deadline) <= wait {
			return
		}
		time.Sleep(wait)
	}
}

// mayHaveRun reports whether a command that failed with cause may still reach Redis: it timed
// out or was cancelled once sent, rather than never finding a connection.
func mayHaveRun(cause error) bool {
	var netErr net.Error
	return errors.Is(cause, context.DeadlineExceeded) || errors.Is(cause, context.Canceled) ||
		errors.As(cause, &netErr) && netErr.Timeout()
}
