package waiting

import (
	"fmt"
	"testing"
)

// TestPredictions_StayBounded: the users remembered never exceed maxPredictions an event, and
// an event's are forgotten when it sells out or its room is no longer in use.
func TestPredictions_StayBounded(t *testing.T) {
	p := newPredictions()
	for i := range 3 * maxPredictions {
		p.add("busy", fmt.Sprint("user-", i))
		if p.size() > maxPredictions {
			t.Fatalf("%d users remembered after %d polls", p.size(), i+1)
		}
	}
	for i := range 100 {
		event := fmt.Sprint("event-", i)
		if !p.add(event, "u") || p.add(event, "u") {
			t.Fatal("a user is new once")
		}
	}
	p.forget("event-0", "u")
	if !p.add("event-0", "u") {
		t.Fatal("a forgotten user is new again")
	}
	p.forgetEvent("busy")
	p.keepOnly([]string{"event-1", "event-2"})
	if got := p.size(); got != 2 {
		t.Fatalf("%d users remembered for two events in use, want 2", got)
	}
}
