package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// undoLater tries until the undo succeeds, then stops; an undo that keeps failing stops when its
// time is up.
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

}

// A command that timed out or was cancelled may have reached Redis; one refused a connection
// did not.
func TestMayHaveRun(t *testing.T) {
	t.Parallel()
	timeout := &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}
	refused := &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	for cause, want := range map[error]bool{
		context.DeadlineExceeded:            true,
		context.Canceled:                    true,
		timeout:                             true,
		fmt.Errorf("pipeline: %w", timeout): true,
		refused:                             false,
		errors.New("ERR unknown command"):   false,
	} {
		if got := mayHaveRun(cause); got != want {
			t.Errorf("%v: %v, want %v", cause, got, want)
		}
	}
}
