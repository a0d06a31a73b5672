package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// undoLater runs the undo in the background, the caller never waiting for it.
func TestUndoLater_UndoesInTheBackground(t *testing.T) {
	t.Parallel()
	undone := make(chan struct{})
	markUndone := sync.OnceFunc(func() { close(undone) })
	undoLater(context.DeadlineExceeded, time.Minute, func(context.Context) error {
		markUndone()
		return nil
	})
	select {
	case <-undone:
	case <-time.After(10 * time.Second):
		t.Fatal("the undo never ran")
	}
}

// undoUntil tries until the undo succeeds, then stops; an undo that keeps failing stops when its
// time is up, each try bounded by it. Either returns well within the 10 s that a loop trying on
// would outlast: the undo that succeeds has a minute.
func TestUndoUntil_TriesUntilItSucceedsOrItsTimeIsUp(t *testing.T) {
	t.Parallel()
	var tries atomic.Int32
	returnsWithinTenSeconds(t, "an undo that succeeds on its third try", func() {
		undoUntil(time.Now().Add(time.Minute), func(context.Context) error {
			if tries.Add(1) < 3 {
				return errors.New("redis frozen")
			}
			return nil
		})
	})
	if tries.Load() != 3 {
		t.Errorf("%d tries of an undo that succeeded on its third", tries.Load())
	}

	var failing atomic.Int32
	deadline := time.Now().Add(300 * time.Millisecond)
	returnsWithinTenSeconds(t, "an undo that keeps failing", func() {
		undoUntil(deadline, func(ctx context.Context) error {
			failing.Add(1)
			if got, _ := ctx.Deadline(); !got.Equal(deadline) {
				t.Errorf("a try until %v, want the undo's deadline %v", got, deadline)
			}
			return errors.New("redis frozen")
		})
	})
	if failing.Load() == 0 {
		t.Error("an undo that was never tried")
	}
}

// returnsWithinTenSeconds fails t unless call returns within 10 s.
func returnsWithinTenSeconds(t *testing.T, what string, call func()) {
	t.Helper()
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		call()
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: tries went on after 10 s", what)
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
