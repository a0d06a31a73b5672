package waiting_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/application/waiting"
)

// newBroker returns a broker on in-memory adapters and a push event in it.
func newBroker(t *testing.T) (*waiting.Broker, string) {
	t.Helper()
	svc, coord := newService(memory.NewClock(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)))
	event, err := svc.CreateEvent(context.Background(), waiting.CreateEventCommand{Name: "close", Seats: 2, Slots: 1, Mode: "push"})
	if err != nil {
		t.Fatal(err)
	}
	return waiting.NewBroker(svc, coord.PushQueue, "broker-1", waiting.PushConfig{}, nil, nil), event.ID
}

// stream is an adapter's side of a subscription: on End it leaves, as an adapter does once its
// connection is closed, unless it hangs.
type stream struct {
	broker *waiting.Broker
	sub    *waiting.Subscription
	hangs  bool
}

func (s *stream) Position(waiting.Position)  {}
func (s *stream) Admitted(waiting.Admission) {}
func (s *stream) End() {
	if !s.hangs {
		go s.broker.Leave(s.sub)
	}
}

func join(t *testing.T, b *waiting.Broker, eventID, userID string, hangs bool) {
	t.Helper()
	s := &stream{broker: b, hangs: hangs}
	sub, err := b.Join(context.Background(), eventID, userID, s)
	if err != nil {
		t.Fatal(err)
	}
	s.sub = sub
}

func TestBrokerClose_EndsEveryConnectionAndWaitsForThemToLeave(t *testing.T) {
	b, eventID := newBroker(t)
	join(t, b, eventID, "admitted", false)
	join(t, b, eventID, "waiting", false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := b.Join(ctx, eventID, "late", &stream{broker: b}); !errors.Is(err, waiting.ErrBrokerClosed) {
		t.Fatalf("join after close: %v, want ErrBrokerClosed", err)
	}
}

func TestBrokerClose_GivesUpOnAConnectionThatNeverLeaves(t *testing.T) {
	b, eventID := newBroker(t)
	join(t, b, eventID, "stuck", true)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := b.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close: %v, want the deadline", err)
	}
}
