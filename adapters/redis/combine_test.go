package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rushgate/rushgate/ports"
)

// The combining itself is tested with its engine (application/guard/combine); these tests check
// the waiting room's use of it: its bounds, and that run's answers and errors reach each call.

// A crowd on one key gets each its own answer, through at most combinedInFlight runs at once of
// at most maxCombined calls each.
func TestCombiner_ACrowdIsServedWithinTheWaitingRoomsBounds(t *testing.T) {
	var mu sync.Mutex
	running, mostRunning, largest := 0, 0, 0
	release := make(chan struct{})
	c := newCombiner(combinedInFlight, 0, func(_ context.Context, key string, batch []int) ([]string, error) {
		mu.Lock()
		running++
		mostRunning, largest = max(mostRunning, running), max(largest, len(batch))
		mu.Unlock()
		<-release
		mu.Lock()
		running--
		mu.Unlock()
		out := make([]string, len(batch))
		for i, in := range batch {
			out[i] = fmt.Sprintf("%s:%d", key, in)
		}
		return out, nil
	})
	crowd := 2*maxCombined + combinedInFlight + 5
	answers := make([]string, crowd)
	errs := make([]error, crowd)
	var wg sync.WaitGroup
	for i := range crowd {
		wg.Go(func() { answers[i], errs[i] = c.do(context.Background(), "e", i) })
	}
	close(release)
	wg.Wait()
	for i := range crowd {
		if want := fmt.Sprintf("e:%d", i); errs[i] != nil || answers[i] != want {
			t.Fatalf("call %d answered %q, %v; want %q", i, answers[i], errs[i], want)
		}
	}
	if mostRunning > combinedInFlight || largest > maxCombined {
		t.Fatalf("%d runs at once of up to %d calls; want at most %d of at most %d",
			mostRunning, largest, combinedInFlight, maxCombined)
	}
}

func TestCombiner_ARunErrorAnswersItsCalls(t *testing.T) {
	down := fmt.Errorf("redis frozen: %w", ports.ErrUnavailable)
	c := newCombiner(combinedInFlight, 0, func(context.Context, string, []int) ([]string, error) {
		return nil, down
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.do(ctx, "e", 0); !errors.Is(err, down) {
		t.Fatalf("err = %v, want the run's error", err)
	}
}
