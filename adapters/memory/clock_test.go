package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
)

func TestSleeper_AdvancesTheClockInsteadOfWaiting(t *testing.T) {
	clock := newFakeClock()
	start := clock.Now()
	sleeper := memory.NewSleeper(clock)
	for _, d := range []time.Duration{time.Second, time.Hour} {
		if err := sleeper.Sleep(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	if got := clock.Now().Sub(start); got != time.Hour+time.Second {
		t.Fatalf("clock moved %v", got)
	}
	if waits := sleeper.Waits(); len(waits) != 2 || waits[0] != time.Second || waits[1] != time.Hour {
		t.Fatalf("waits %v", waits)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sleeper.Sleep(ctx, time.Minute); !errors.Is(err, context.Canceled) || clock.Now().Sub(start) != time.Hour+time.Second {
		t.Fatalf("cancelled sleep: %v", err)
	}
}
