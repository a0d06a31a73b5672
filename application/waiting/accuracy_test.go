package waiting_test

import (
	"context"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/application/waiting"
	domainwaiting "github.com/rushgate/rushgate/domain/waiting"
)

// TestQueue_WaitAccuracyComparesTheFirstEstimateWithTheActualWait: on a controlled clock, a
// user told 2 s (one admission in two seconds, one ahead) who waits 10 s is off by 8 s, whatever
// later polls said; a user who was never given an estimate leaves no sample; the admission
// rate is in the view.
func TestQueue_WaitAccuracyComparesTheFirstEstimateWithTheActualWait(t *testing.T) {
	ctx := context.Background()
	clock := memory.NewClock(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC))
	svc := newRooms(clock).svc
	event, err := svc.CreateEvent(ctx, waiting.CreateEventCommand{Name: "accuracy", Seats: 10, Slots: 1, Mode: "pull"})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"holder", "told", "untold"} {
		if _, _, err := svc.Enter(ctx, event.ID, u); err != nil {
			t.Fatal(err)
		}
	}
	passSeconds(t, svc, clock, 1)
	if _, _, err := svc.Claim(ctx, event.ID, "holder"); err != nil {
		t.Fatal(err)
	}
	passSeconds(t, svc, clock, 1)
	if err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	status := func(user string) waiting.StatusView {
		t.Helper()
		v, err := svc.Status(ctx, event.ID, user)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	checkEstimate(t, "first estimate", status("told").EstimatedWaitSeconds, seconds(2))
	clock.Advance(4 * time.Second)
	status("told") // a later estimate, not the first: not the prediction
	clock.Advance(6 * time.Second)
	if err := svc.Return(ctx, event.ID, "holder"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Claim(ctx, event.ID, "told"); err != nil {
		t.Fatal(err)
	}
	if err := svc.Return(ctx, event.ID, "told"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Claim(ctx, event.ID, "untold"); err != nil {
		t.Fatal(err)
	}
	view, err := svc.Queue(ctx, event.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := domainwaiting.WaitAccuracy{Samples: 1, MedianErrorSeconds: 8, P90ErrorSeconds: 8}
	if view.WaitAccuracy != want {
		t.Fatalf("wait accuracy %+v, want %+v", view.WaitAccuracy, want)
	}
	if view.AdmissionRate == nil {
		t.Fatal("admission rate unknown after two passes a second apart")
	}
}
