package redis

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// undoLater tries until the undo succeeds, then stops; an undo that keeps failing stops when its
// time is up; a command that never reached Redis is not undone.
func TestUndoLater_TriesUntilItSucceedsOrItsTimeIsUp(t *testing.T) {
	t.Parallel()
	var tries atomic.Int32
	done := make(chan struct{})
	undoLater(context.DeadlineExceeded, time.Minute, func(context.Context) error {
		if tries.Add(1) < 3 {
			return errors.New("redis frozen")
		}
		close(done)
		return nil
	})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the undo succeeded on no try of %d", tries.Load())
	}

	var failing atomic.Int32
	const within = 300 * time.Millisecond
	undoLater(context.DeadlineExceeded, within, func(ctx context.Context) error {
		failing.Add(1)
		if _, ok := ctx.Deadline(); !ok {
			t.Error("a try without a deadline")
		}
		return errors.New("redis frozen")
	})
	time.Sleep(within + undoMaxWait)
	after := failing.Load()
	time.Sleep(2 * undoMaxWait)
	if failing.Load() != after || after == 0 {
		t.Fatalf("tries went on past the undo's time: %d, then %d", after, failing.Load())
	}
	if tries.Load() != 3 {
		t.Fatalf("%d tries of an undo that succeeded on its third", tries.Load())
	}

	var refused atomic.Int32
	undoLater(&net.OpError{Op: "dial", Err: errors.New("connection refused")}, time.Minute, func(context.Context) error {
		refused.Add(1)
		return nil
	})
	time.Sleep(undoMaxWait)
	if refused.Load() != 0 {
		t.Fatal("a command refused a connection was undone")
	}
}
