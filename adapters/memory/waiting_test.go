package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/ports"
)

// A room a pass found empty is kept until the retention has passed, to the microsecond, then
// forgotten: answered ErrRoomNotOpen, and dropped from the process by the next Events, which
// every reconciliation pass starts with. A user's entry before then keeps it for good.
func TestWaitingRoom_ForgetsAnEmptiedRoomAfterTheRetention(t *testing.T) {
	const retention = time.Hour
	ctx := context.Background()
	clock := newFakeClock()
	w := memory.NewWaitingRoom(clock)
	for _, id := range []string{"kept", "emptied"} {
		if err := w.Open(ctx, id, 1, 5); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Reconcile(ctx, id, 0, retention); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(retention - time.Microsecond)
	if _, err := w.Enter(ctx, "kept", "a"); err != nil {
		t.Fatal(err)
	}
	if err := w.Leave(ctx, "kept", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Stats(ctx, "emptied"); err != nil {
		t.Fatalf("stats a microsecond before the retention passed: %v", err)
	}

	clock.Advance(time.Microsecond)
	if _, err := w.Events(ctx); err != nil {
		t.Fatal(err)
	}
	if n := memory.StoredRooms(w); n != 1 {
		t.Errorf("%d rooms held once the emptied one's retention passed, want 1 (the one entered)", n)
	}
	if _, err := w.Stats(ctx, "emptied"); !errors.Is(err, ports.ErrRoomNotOpen) {
		t.Errorf("stats of the forgotten room: %v, want ErrRoomNotOpen", err)
	}
	clock.Advance(10 * retention)
	if _, err := w.Events(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Stats(ctx, "kept"); err != nil {
		t.Errorf("stats of the room entered before its retention passed: %v", err)
	}
}
