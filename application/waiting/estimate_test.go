package waiting_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/application/waiting"
	domainwaiting "github.com/rushgate/rushgate/domain/waiting"
)

// passSeconds runs a reconciliation pass, as the workers do every tick, then advances the clock
// a second, n times.
func passSeconds(t *testing.T, svc *waiting.Service, clock *memory.Clock, n int) {
	t.Helper()
	for range n {
		if err := svc.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
	}
}

// checkEstimate fails unless estimate is want (nil: null), and never lets a negative or an
// over-a-day estimate pass.
func checkEstimate(t *testing.T, what string, estimate *int, want *int) {
	t.Helper()
	if estimate != nil && (*estimate < 0 || *estimate > int(domainwaiting.MaxEstimatedWait.Seconds())) {
		t.Fatalf("%s: estimate %d out of range", what, *estimate)
	}
	switch {
	case want == nil && estimate != nil:
		t.Fatalf("%s: estimate %d, want null", what, *estimate)
	case want != nil && (estimate == nil || *estimate != *want):
		t.Fatalf("%s: estimate %v, want %d", what, estimate, *want)
	}
}

func seconds(n int) *int { return &n }

// TestStatus_EstimateIsNullOnceNoAdmissionWasInTheLastMinute: the reported sold-out rush — one
// admission, then the slot stays held. The waiting user's estimate is the measured one while
// the admission is within the minute and null after, never negative; the operators' rate is a
// known 0.
func TestStatus_EstimateIsNullOnceNoAdmissionWasInTheLastMinute(t *testing.T) {
	ctx := context.Background()
	clock := memory.NewClock(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC))
	svc := newRooms(clock).svc
	event, err := svc.CreateEvent(ctx, waiting.CreateEventCommand{Name: "held", Seats: 10, Slots: 1, Mode: "pull"})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"holder", "next"} {
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
	status := func() waiting.StatusView {
		t.Helper()
		v, err := svc.Status(ctx, event.ID, "next")
		if err != nil {
			t.Fatal(err)
		}
		if v.Rank != 0 || v.AheadCount != 1 {
			t.Fatalf("next: %+v, want rank 0, aheadCount 1", v)
		}
		return v
	}
	// One admission in the 2 s since the first pass: 0.5/s, so 2 s for the one ahead.
	checkEstimate(t, "a second after the admission", status().EstimatedWaitSeconds, seconds(2))

	passSeconds(t, svc, clock, 58)
	// At t = 60 s the last pass was at 59 s: one admission in 59 s.
	checkEstimate(t, "within the minute", status().EstimatedWaitSeconds, seconds(59))
	passSeconds(t, svc, clock, 2)
	checkEstimate(t, "a minute after the admission", status().EstimatedWaitSeconds, nil)
	queue, err := svc.Queue(ctx, event.ID)
	if err != nil {
		t.Fatal(err)
	}
	if queue.AdmissionRate == nil || *queue.AdmissionRate != 0 {
		t.Fatalf("admission rate %v, want a measured 0", queue.AdmissionRate)
	}

	// Later admissions bring the estimate back.
	if err := svc.Return(ctx, event.ID, "holder"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Enter(ctx, event.ID, "last"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Claim(ctx, event.ID, "next"); err != nil {
		t.Fatal(err)
	}
	passSeconds(t, svc, clock, 1)
	last, err := svc.Status(ctx, event.ID, "last")
	if err != nil {
		t.Fatal(err)
	}
	// One admission in the 59 s between the passes still within the minute.
	checkEstimate(t, "after a new admission", last.EstimatedWaitSeconds, seconds(59))
}

// positions records a push connection's positions.
type positions struct {
	stream
	mu   sync.Mutex
	seen []waiting.PositionView
}

func (p *positions) Position(pos waiting.Position) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, pos.PositionView)
}

func (p *positions) last(t *testing.T) waiting.PositionView {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.seen) == 0 {
		t.Fatal("no position sent")
	}
	return p.seen[len(p.seen)-1]
}

// TestBroker_PositionEstimateIsNullOnceNoAdmissionWasInTheLastMinute: the same rule in push
// positions.
func TestBroker_PositionEstimateIsNullOnceNoAdmissionWasInTheLastMinute(t *testing.T) {
	ctx := context.Background()
	clock := memory.NewClock(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC))
	r := newRooms(clock)
	svc := r.svc
	event, err := svc.CreateEvent(ctx, waiting.CreateEventCommand{Name: "held", Seats: 10, Slots: 1, Mode: "push"})
	if err != nil {
		t.Fatal(err)
	}
	broker := waiting.NewBroker(r.broker, "broker-1", waiting.BrokerConfig{})
	dispatcher := waiting.NewDispatcher(r.dispatcher, "dispatcher-1", waiting.DispatcherConfig{})
	join(t, broker, event.ID, "holder", false)
	next := &positions{stream: stream{broker: broker}}
	sub, err := broker.Join(ctx, event.ID, "next", next)
	if err != nil {
		t.Fatal(err)
	}
	next.sub = sub
	passSeconds(t, svc, clock, 1)
	if err := dispatcher.Promote(ctx, event.ID); err != nil {
		t.Fatal(err)
	}
	passSeconds(t, svc, clock, 1)
	if err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	broker.Tick(ctx)
	got := next.last(t)
	if got.Rank != 0 || got.AheadCount != 1 || got.QueueSize != 1 {
		t.Fatalf("next: %+v, want rank 0, aheadCount 1 in a queue of 1", got)
	}
	checkEstimate(t, "a second after the admission", got.EstimatedWaitSeconds, seconds(2))

	// The broker ticks every second, as it does when it runs, so its heartbeat stays fresh.
	for range 60 {
		passSeconds(t, svc, clock, 1)
		broker.Tick(ctx)
	}
	checkEstimate(t, "a minute after the admission", next.last(t).EstimatedWaitSeconds, nil)
}
