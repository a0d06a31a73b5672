package testkit_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/test/testkit"
)

// Every call runs once, and all of them are running at the same time: each waits inside run
// until all n have entered, which only ends if none had to return before the last started.
func TestStartTogether_RunsEveryCallAtOnce(t *testing.T) {
	const n = 64
	var inside atomic.Int32
	var calls [n]atomic.Int32
	testkit.StartTogether(n, func(i int) {
		calls[i].Add(1)
		inside.Add(1)
		testkit.Eventually(t, 10*time.Second, "every call inside", func() error {
			if got := inside.Load(); got < n {
				return fmt.Errorf("%d of %d inside", got, n)
			}
			return nil
		})
	})
	for i := range calls {
		if got := calls[i].Load(); got != 1 {
			t.Fatalf("run(%d) ran %d times", i, got)
		}
	}
}

func TestEventually_ReturnsOnceTheCheckPasses(t *testing.T) {
	var polls atomic.Int32
	testkit.Eventually(t, 10*time.Second, "the third poll", func() error {
		if polls.Add(1) < 3 {
			return errors.New("too early")
		}
		return nil
	})
	if got := polls.Load(); got != 3 {
		t.Fatalf("%d polls, want 3: Eventually went on after the check passed", got)
	}
}

// fatalRecorder is a testing.TB whose Fatalf records its message and ends the goroutine, as the
// real one does.
type fatalRecorder struct {
	testing.TB
	message string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.message = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestEventually_FailsWithWhatAndTheLastObservedState(t *testing.T) {
	recorder := &fatalRecorder{TB: t}
	var polls atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		testkit.Eventually(recorder, 20*time.Millisecond, "the queue drains", func() error {
			return fmt.Errorf("%d waiting", polls.Add(1))
		})
	}()
	<-done
	last := fmt.Sprintf("last seen: %d waiting", polls.Load())
	if !strings.HasPrefix(recorder.message, "the queue drains: not within 20ms") || !strings.HasSuffix(recorder.message, last) {
		t.Fatalf("failure %q, want what, the bound and %q", recorder.message, last)
	}
}
