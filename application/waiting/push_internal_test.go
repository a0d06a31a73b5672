package waiting

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/ports"
)

func TestEachAtOnce_RunsEveryMessageRouteParallelismAtOnceAndAnswersTheError(t *testing.T) {
	batch := make([]ports.Promotion, 3*routeParallelism)
	for i := range batch {
		batch[i].UserID = strconv.Itoa(i)
	}
	failed := errors.New("queue unavailable")
	var running, peak, ran atomic.Int32
	full := make(chan struct{})
	var fullOnce sync.Once
	err := eachAtOnce(batch, func(p ports.Promotion) error {
		n := running.Add(1)
		defer running.Add(-1)
		for old := peak.Load(); n > old && !peak.CompareAndSwap(old, n); old = peak.Load() {
		}
		if n == routeParallelism {
			fullOnce.Do(func() { close(full) })
		}
		// The first ones wait for each other: one at a time would never get here.
		select {
		case <-full:
		case <-time.After(5 * time.Second):
			return errors.New("never ran routeParallelism at once")
		}
		ran.Add(1)
		if p.UserID == "1" {
			return failed
		}
		return nil
	})
	if !errors.Is(err, failed) {
		t.Fatalf("error %v, want the failed message's", err)
	}
	if got := int(ran.Load()); got != len(batch) {
		t.Fatalf("%d of %d messages ran", got, len(batch))
	}
	if got := peak.Load(); got != routeParallelism {
		t.Fatalf("%d ran at once, want %d", got, routeParallelism)
	}
}
