package redis

import (
	"testing"
	"time"
)

// TestClockAnchor_StepsOnlyWhenASampleProvesItWrong: the first measurement anchors at Redis's
// answer; after it a prediction within the sample's round trip is kept, and one outside it moves
// to the window's nearest edge, so a step back is no more than the prediction was ahead.
func TestClockAnchor_StepsOnlyWhenASampleProvesItWrong(t *testing.T) {
	base := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	local := base.Add(-5 * time.Second) // the local clock is 5 s behind
	unmeasured := &clockAnchor{redis: local, local: local}
	sample := func(after, redisAhead, rtt time.Duration) clockSample {
		return clockSample{redis: base.Add(after + redisAhead), local: local.Add(after), rtt: rtt}
	}

	first := unmeasured.next(sample(0, 0, 4*time.Millisecond))
	if got := first.at(local.Add(time.Second)); !got.Equal(base.Add(time.Second)) {
		t.Fatalf("first measurement predicts %s a second on, want %s", got, base.Add(time.Second))
	}
	// Redis reads 1 ms later than predicted, within the 4 ms round trip: kept.
	if kept := first.next(sample(10*time.Second, time.Millisecond, 4*time.Millisecond)); kept != first {
		t.Fatalf("a sample within its round trip moved the anchor: %+v", kept)
	}
	// The local clock ran 3 ms fast over 10 s: the prediction is 3 ms ahead, 1 ms past the window.
	back := first.next(sample(10*time.Second, -3*time.Millisecond, 4*time.Millisecond))
	at := local.Add(10 * time.Second)
	if step := back.at(at).Sub(first.at(at)); step != -time.Millisecond {
		t.Fatalf("stepped %s, want back 1 ms", step)
	}
	// Redis's clock was set 2 s ahead (a failover): followed, to within the round trip.
	ahead := back.next(sample(20*time.Second, 2*time.Second, 4*time.Millisecond))
	at = local.Add(20 * time.Second)
	if got, want := ahead.at(at), base.Add(22*time.Second-2*time.Millisecond); !got.Equal(want) {
		t.Fatalf("after Redis moved: %s, want %s", got, want)
	}
}
