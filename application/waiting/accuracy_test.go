package waiting_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/application/waiting"
	domainwaiting "github.com/rushgate/rushgate/domain/waiting"
)

// TestQueue_WaitAccuracyComparesTheFirstEstimateWithTheActualWait: on a controlled clock, a
// user told 2 s (one admission in two seconds, one ahead) who waits 10 s is off by 8 s, whatever
// later polls said; the holder, told 0 s on entering (nobody ahead) and admitted a second later,
// by 1 s; a user who was never given an estimate leaves no sample; the admission rate is in the
// view.
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
	want := domainwaiting.WaitAccuracy{Samples: 2, MedianErrorSeconds: 1, P90ErrorSeconds: 8}
	if view.WaitAccuracy != want {
		t.Fatalf("wait accuracy %+v, want %+v", view.WaitAccuracy, want)
	}
	if view.AdmissionRate == nil {
		t.Fatal("admission rate unknown after two passes a second apart")
	}
}

// holderAdmitted creates a pull event of one slot whose holder, told 0 s on entering, is
// admitted a second later; a second after that, a reconciliation pass knows the admission rate
// (one in two seconds), so the next user to enter is told 2 s.
func holderAdmitted(t *testing.T) (rooms, *memory.Clock, string) {
	t.Helper()
	ctx := context.Background()
	clock := memory.NewClock(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC))
	r := newRooms(clock)
	event, err := r.svc.CreateEvent(ctx, waiting.CreateEventCommand{Name: "accuracy", Seats: 10, Slots: 1, Mode: "pull"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.svc.Enter(ctx, event.ID, "holder"); err != nil {
		t.Fatal(err)
	}
	passSeconds(t, r.svc, clock, 1)
	if _, _, err := r.svc.Claim(ctx, event.ID, "holder"); err != nil {
		t.Fatal(err)
	}
	passSeconds(t, r.svc, clock, 1)
	if err := r.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	return r, clock, event.ID
}

// admitNext gives the holder's slot back, admits user in it and answers the event's wait
// accuracy.
func admitNext(t *testing.T, svc *waiting.Service, eventID, user string) domainwaiting.WaitAccuracy {
	t.Helper()
	ctx := context.Background()
	if err := svc.Return(ctx, eventID, "holder"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Claim(ctx, eventID, user); err != nil {
		t.Fatal(err)
	}
	view, err := svc.Queue(ctx, eventID)
	if err != nil {
		t.Fatal(err)
	}
	return view.WaitAccuracy
}

// The estimate an entry answers with is the first one the user was given: a user told 2 s on
// entering, who polls later and is admitted 30 s after entering, is off by 28 s (and the
// holder, told 0 s on entering and admitted a second later, by 1 s).
func TestQueue_WaitAccuracyCountsTheEstimateGivenOnEntry(t *testing.T) {
	ctx := context.Background()
	r, clock, eventID := holderAdmitted(t)
	entered, _, err := r.svc.Enter(ctx, eventID, "told")
	if err != nil {
		t.Fatal(err)
	}
	checkEstimate(t, "estimate on entry", entered.EstimatedWaitSeconds, seconds(2))
	clock.Advance(20 * time.Second)
	if _, err := r.svc.Status(ctx, eventID, "told"); err != nil { // a later estimate, not the prediction
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	want := domainwaiting.WaitAccuracy{Samples: 2, MedianErrorSeconds: 1, P90ErrorSeconds: 28}
	if got := admitNext(t, r.svc, eventID, "told"); got != want {
		t.Fatalf("wait accuracy %+v, want %+v", got, want)
	}
}

// A user who left (here through another instance, which this one cannot know of) and enters
// again starts a new wait, whose prediction is the estimate the new entry answers with.
func TestQueue_WaitAccuracyStartsAfreshForAUserWhoLeftAndCameBack(t *testing.T) {
	ctx := context.Background()
	r, clock, eventID := holderAdmitted(t)
	other := waiting.NewService(r.deps, waiting.Config{})
	if _, _, err := r.svc.Enter(ctx, eventID, "back"); err != nil {
		t.Fatal(err)
	}
	if err := other.Leave(ctx, eventID, "back"); err != nil {
		t.Fatal(err)
	}
	entered, created, err := r.svc.Enter(ctx, eventID, "back")
	if err != nil || !created {
		t.Fatalf("entering again: created %v, %v", created, err)
	}
	checkEstimate(t, "estimate on entering again", entered.EstimatedWaitSeconds, seconds(2))
	clock.Advance(10 * time.Second)
	// The holder is off by 1 s (told 0, admitted a second later), the user back by 8 s.
	want := domainwaiting.WaitAccuracy{Samples: 2, MedianErrorSeconds: 1, P90ErrorSeconds: 8}
	if got := admitNext(t, r.svc, eventID, "back"); got != want {
		t.Fatalf("wait accuracy %+v, want %+v", got, want)
	}
}

// TestBroker_WaitAccuracyComparesTheFirstEstimateShownWithTheActualWait: the same rule in push
// mode, on a controlled clock. The prediction is the first non-null estimate a position showed
// (a null one before it, later ones and the ones a reconnection shows are not it); the error is
// actual − predicted, signed in the store and absolute in the view. A user admitted before any
// position reached them, and one who left the line, leave no sample.
func TestBroker_WaitAccuracyComparesTheFirstEstimateShownWithTheActualWait(t *testing.T) {
	ctx := context.Background()
	clock := memory.NewClock(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC))
	r := newRooms(clock)
	svc := r.svc
	event, err := svc.CreateEvent(ctx, waiting.CreateEventCommand{Name: "push accuracy", Seats: 10, Slots: 1, Mode: "push"})
	if err != nil {
		t.Fatal(err)
	}
	broker := waiting.NewBroker(r.broker, "broker-1", waiting.BrokerConfig{})
	dispatcher := waiting.NewDispatcher(r.dispatcher, "dispatcher-1", waiting.DispatcherConfig{})
	reconcile := func() {
		t.Helper()
		if err := svc.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	promote := func() {
		t.Helper()
		if err := dispatcher.Promote(ctx, event.ID); err != nil {
			t.Fatal(err)
		}
	}
	// connect opens a connection whose positions are recorded; the test leaves it itself, as an
	// adapter does once the connection is closed.
	connect := func(user string) *positions {
		t.Helper()
		p := &positions{stream: stream{broker: broker, hangs: true}}
		sub, err := broker.Join(ctx, event.ID, user, p)
		if err != nil {
			t.Fatal(err)
		}
		p.sub = sub
		return p
	}
	// seconds pass with the broker ticking every second, as it does when it runs.
	pass := func(n int) {
		for range n {
			clock.Advance(time.Second)
			broker.Tick(ctx)
		}
	}

	holder := connect("holder")
	reconcile() // t = 0 s: no admission yet
	clock.Advance(2 * time.Second)
	promote() // t = 2 s: the holder is admitted before any position reached them
	told, second, leaver := connect("told"), connect("second"), connect("leaver")
	broker.Tick(ctx)
	checkEstimate(t, "before any rate", told.last(t).EstimatedWaitSeconds, nil)
	reconcile() // one admission in 2 s
	broker.Tick(ctx)
	checkEstimate(t, "told's first estimate", told.last(t).EstimatedWaitSeconds, seconds(2))
	checkEstimate(t, "second's first estimate", second.last(t).EstimatedWaitSeconds, seconds(4))
	checkEstimate(t, "leaver's first estimate", leaver.last(t).EstimatedWaitSeconds, seconds(6))

	pass(6)
	reconcile() // t = 8 s: one admission in 8 s
	broker.Leave(leaver.sub)
	late := connect("late")
	// told reconnects: the new connection's first estimate is not told's first.
	again := connect("told")
	broker.Leave(told.sub)
	broker.Tick(ctx)
	checkEstimate(t, "told's estimate after reconnecting", again.last(t).EstimatedWaitSeconds, seconds(8))
	checkEstimate(t, "late's first estimate", late.last(t).EstimatedWaitSeconds, seconds(24))

	pass(4)
	// t = 12 s: each admitted user leaves and the next is admitted.
	for _, admitted := range []*positions{holder, again, second} {
		broker.Leave(admitted.sub)
		promote()
	}
	if v, err := svc.Queue(ctx, event.ID); err != nil || v.Admitted != 1 || v.Waiting != 0 {
		t.Fatalf("after the admissions: %+v, %v; want late admitted and nobody waiting", v, err)
	}
	broker.Leave(late.sub)

	// told waited 10 s for 2, second 10 s for 4, late 4 s for 24; newest first.
	signed, err := r.coord.WaitingRoom.WaitErrors(ctx, event.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{-20 * time.Second, 6 * time.Second, 8 * time.Second}; !slices.Equal(signed, want) {
		t.Fatalf("wait errors %v, want %v", signed, want)
	}
	view, err := svc.Queue(ctx, event.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := domainwaiting.WaitAccuracy{Samples: 3, MedianErrorSeconds: 8, P90ErrorSeconds: 20}
	if view.WaitAccuracy != want {
		t.Fatalf("wait accuracy %+v, want %+v", view.WaitAccuracy, want)
	}
}
