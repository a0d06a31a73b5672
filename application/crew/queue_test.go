package crew_test

import (
	"context"
	"testing"
	"time"
)

type queuedJoin struct{ userID, key string }

// serveQueued holds the crew's lock as another instance would, queues the joins on the
// fixture's first instance in order, each only once the previous one is queued, then releases
// the lock, so the joins are served in one batch (with a fixture made withParkedHeads). It
// returns each join's answer code in order.
func serveQueued(t *testing.T, f *fixture, crewID string, joins []queuedJoin) []string {
	t.Helper()
	const patience = 10 * time.Second
	holder := f.hold(t, crewID)
	answers := make([]chan string, len(joins))
	for i, j := range joins {
		answers[i] = make(chan string, 1)
		go func() { answers[i] <- code(joinWithKey(context.Background(), f.svc, crewID, j.userID, j.key)) }()
		select {
		case <-f.queues.Joined():
		case c := <-answers[i]:
			t.Fatalf("join %d answered %s without queueing", i, c)
		case <-time.After(patience):
			t.Fatalf("join %d never queued", i)
		}
	}
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	codes := make([]string, len(joins))
	for i := range answers {
		select {
		case codes[i] = <-answers[i]:
		case <-time.After(patience):
			t.Fatalf("join %d: no answer", i)
		}
	}
	return codes
}
