package porttest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/ports"
)

// TestSoldOut checks the sold-out rules of ports.WaitingRoom and ports.PushQueue: a
// seat counter at 0 admits nobody, by claim or by promotion, and no claim that starts after the
// decrement that reached 0 slips past it; a repaired counter lets admission resume; a room
// marked sold out empties its line and answers ErrSoldOut to every entry, poll, claim and
// connection from then on, for good (a repair, a second mark or a second open change
// nothing), and its snapshot says so; a room opened with no seat is sold out.
func TestSoldOut(t *testing.T, newRoom func(t *testing.T) PushRoom, caps Capabilities) {
	run(t, newRoom, caps, []testCase[PushRoom]{
		{"CounterAtZero_AdmitsNobodyUntilRepaired", testCounterAtZero},
		{"CounterAtZero_NoClaimSlipsPastTheLastSeat", testNoClaimPastLastSeat},
		{"MarkSoldOut_IsFinal", testMarkSoldOutFinal},
		{"Open_WithNoSeatIsSoldOut", testOpenWithNoSeat},
	})
}

func testCounterAtZero(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 3, 1)
	enter(t, e.impl, eventID, "a")
	connect(t, e.impl, eventID, "b", "broker|1|")
	left, err := e.impl.TakeSeat(ctx, eventID)
	must(t, err, "take the last seat")
	expectEqual(t, left, 0, "seats after the last one")
	res := claim(t, e.impl, eventID, "a", longTokenTTL)
	expectEqual(t, res.Claimed, false, "claim with no seat left")
	expectEqual(t, res.Place.RemainingSlots, 0, "remaining slots with no seat left")
	expectEqual(t, position(t, e.impl, eventID, "a").RemainingSlots, 0, "polled remaining slots with no seat left")
	n, _, err := e.impl.Promote(ctx, eventID, longTokenTTL, ports.EntryRead{})
	must(t, err, "promote with no seat left")
	expectEqual(t, n, 0, "promoted with no seat left")
	snap, err := e.impl.Snapshot(ctx, eventID)
	must(t, err, "snapshot")
	expectEqual(t, snap.SoldOut, false, "a counter at 0 alone is not sold out")
	expectEqual(t, len(snap.Waiting), 2, "waiting users kept while the database is asked")

	reset, err := e.impl.ResetSeatsLeft(ctx, eventID, 0, 1)
	must(t, err, "repair")
	expectEqual(t, reset, true, "repair from 0")
	expectEqual(t, claim(t, e.impl, eventID, "a", longTokenTTL).Created, true, "claim after the repair")
}

func testNoClaimPastLastSeat(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	const n = 200
	eventID := openRoom(t, e.impl, n, 1)
	line := users(n)
	for _, u := range line {
		enter(t, e.impl, eventID, u)
	}
	var taken atomic.Bool
	var late atomic.Int32
	errs := startTogether(n+1, func(i int) error {
		if i == n {
			_, err := e.impl.TakeSeat(ctx, eventID)
			taken.Store(true)
			return err
		}
		after := taken.Load()
		res, err := e.impl.Claim(ctx, eventID, line[i], "t", longTokenTTL)
		if after && res.Created {
			late.Add(1)
		}
		return err
	})
	for _, err := range errs {
		must(t, err, "claim or take")
	}
	expectEqual(t, late.Load(), int32(0), "claims admitted that started after the counter reached 0")
	if !taken.Load() {
		t.Fatal("the seat was never taken")
	}
}

func testMarkSoldOutFinal(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 2)
	enter(t, e.impl, eventID, "admitted")
	claim(t, e.impl, eventID, "admitted", longTokenTTL)
	enter(t, e.impl, eventID, "waiting")
	connect(t, e.impl, eventID, "streaming", "broker|1|")
	must(t, e.impl.MarkSoldOut(ctx, eventID), "mark sold out")
	must(t, e.impl.MarkSoldOut(ctx, eventID), "mark sold out again")

	s := stats(t, e.impl, eventID)
	expectEqual(t, s.SoldOut, true, "stats' sold out")
	expectEqual(t, s.Waiting, 0, "waiting after sold out")
	expectEqual(t, s.RemainingSeats, 0, "seat counter after sold out")
	expectEqual(t, s.RemainingSlots, 0, "remaining slots after sold out")
	snap, err := e.impl.Snapshot(ctx, eventID)
	must(t, err, "snapshot")
	expectEqual(t, snap.SoldOut, true, "snapshot's sold out")
	expectEqual(t, len(snap.Waiting), 0, "snapshot's line after sold out")

	check := func(when string) {
		t.Helper()
		_, err := e.impl.Enter(ctx, eventID, "late")
		expectIs(t, err, ports.ErrSoldOut, when+": a new entry")
		_, err = e.impl.Enter(ctx, eventID, "waiting")
		expectIs(t, err, ports.ErrSoldOut, when+": a waiting user's entry")
		_, err = e.impl.Position(ctx, eventID, "waiting", longTokenTTL, 0)
		expectIs(t, err, ports.ErrSoldOut, when+": a waiting user's poll")
		_, err = e.impl.Position(ctx, eventID, "stranger", longTokenTTL, 0)
		expectIs(t, err, ports.ErrSoldOut, when+": a stranger's poll")
		_, err = e.impl.Claim(ctx, eventID, "waiting", "t", longTokenTTL)
		expectIs(t, err, ports.ErrSoldOut, when+": a waiting user's claim")
		_, err = e.impl.Claim(ctx, eventID, "admitted", "t", longTokenTTL)
		expectIs(t, err, ports.ErrSoldOut, when+": an admitted user's claim")
		_, err = e.impl.Connect(ctx, eventID, "late", "broker|2|")
		expectIs(t, err, ports.ErrSoldOut, when+": a connection")
		n, _, err := e.impl.Promote(ctx, eventID, longTokenTTL, ports.EntryRead{})
		must(t, err, when+": promote")
		expectEqual(t, n, 0, when+": promoted")
	}
	check("sold out")
	_, err = e.impl.ResetSeatsLeft(ctx, eventID, 0, 5)
	must(t, err, "reset the counter")
	must(t, e.impl.Open(ctx, eventID, 9, 9), "open again")
	check("after a repair and a second open")
}

func testOpenWithNoSeat(t *testing.T, e env[PushRoom]) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	eventID := openRoom(t, e.impl, 1, 0)
	_, err := e.impl.Enter(ctx, eventID, "a")
	expectIs(t, err, ports.ErrSoldOut, "entry into a room opened with no seat")
	expectEqual(t, stats(t, e.impl, eventID).SoldOut, true, "stats' sold out")
}
