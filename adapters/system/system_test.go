package system_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/adapters/system"
)

func TestClock_NowIsUTCAtMicrosecondPrecision(t *testing.T) {
	t.Parallel()
	now := system.Clock{}.Now()
	if now.Location() != time.UTC {
		t.Errorf("location = %v, want UTC", now.Location())
	}
	if now.Nanosecond()%1000 != 0 {
		t.Errorf("%v has sub-microsecond digits", now)
	}
	if d := time.Since(now); d < 0 || d > time.Minute {
		t.Errorf("now is %v away from the wall clock", d)
	}
}

func TestSleeper_WaitsForTheDuration(t *testing.T) {
	t.Parallel()
	start := time.Now()
	if err := (system.Sleeper{}).Sleep(context.Background(), 20*time.Millisecond); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	if waited := time.Since(start); waited < 20*time.Millisecond {
		t.Errorf("returned after %v, want at least 20ms", waited)
	}
}

func TestSleeper_ReturnsContextErrorWhenCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	start := time.Now()
	err := (system.Sleeper{}).Sleep(ctx, time.Hour)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Errorf("took %v to notice the cancellation", waited)
	}
}

func TestUUIDs_AreUniqueTimeOrderedVersion7(t *testing.T) {
	t.Parallel()
	ids := system.UUIDs{}
	prev := ""
	seen := make(map[string]bool)
	for range 1000 {
		id := ids.NewID()
		parsed, err := uuid.Parse(id)
		if err != nil {
			t.Fatalf("%q is not a UUID: %v", id, err)
		}
		if parsed.Version() != 7 {
			t.Fatalf("%q is version %d, want 7", id, parsed.Version())
		}
		if seen[id] {
			t.Fatalf("%q generated twice", id)
		}
		// google/uuid keeps v7 ids monotonic within a process.
		if id <= prev {
			t.Fatalf("%q is not after %q", id, prev)
		}
		seen[id], prev = true, id
	}
}
