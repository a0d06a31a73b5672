package porttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

// opensSoon is how far ahead a case's pre-queue opens: long enough to enter a few users under
// -race on a loaded machine, short enough to wait for.
const opensSoon = 1500 * time.Millisecond

// TestPrequeueRoom checks ports.PrequeueRoom on both views of a gated room: before opensAt an
// entry (pull or push) joins the pre-queue once, without a rank; nobody is claimed or promoted,
// the line is not shown, and neither reading, placing nor opening the pre-queue is due; after
// it, later arrivals queue behind, Prequeued lists the users still pre-queued by arrival, and
// PlacePrequeue places them in steps in the given order ahead of later arrivals while the room
// stays closed, until OpenPrequeue opens it once, appending the ones the order missed and
// skipping users who left; many placers racing, or a placer stopping part-way for another to
// finish, give the same line; a pre-queued user who leaves is out of it; an entry into the
// pre-queue keeps a room a pass found empty; a room without a pre-queue is open.
func TestPrequeueRoom(t *testing.T, newRoom func(t *testing.T) PushRoom, caps Capabilities) {
	run(t, newRoom, caps, []testCase[PushRoom]{
		{"BeforeOpensAt_NoRankNoAdmission", testPrequeueClosed},
		{"Place_InStepsClosedUntilOpenedOnce", testPrequeuePlace},
		{"Place_RacingPlacersPlaceEachUserOnceInOrder", testPrequeueConcurrentPlacers},
		{"Place_APlacerStoppedPartWayIsFinishedByTheNext", testPrequeueStoppedPlacer},
		{"Place_SkipsWhoLeftAndAppendsWhomTheOrderMissed", testPrequeueLeavers},
		{"Leave_TakesAPrequeuedUserOut", testPrequeueLeave},
		{"Reconcile_APrequeueEntryKeepsAnEmptiedRoom", testPrequeueEntryKeepsRoom},
		{"UngatedRoom_IsOpen", testPrequeueUngated},
	})
}

// openGated opens a gated room with a random event id that opens after opensIn.
func openGated(t *testing.T, w PushRoom, slots int, opensIn time.Duration) string {
	t.Helper()
	eventID := "event-" + randomID()
	must(t, w.OpenGated(context.Background(), eventID, slots, slots, time.Now().Add(opensIn)), "open gated room")
	return eventID
}

// awaitOpensAt waits until the store's clock has passed opensAt: Prequeued is due.
func awaitOpensAt(t *testing.T, w PushRoom, eventID string) []string {
	t.Helper()
	var arrivals []string
	testkit.Eventually(t, opensSoon+expiryBound, "opensAt by the store's clock", func() error {
		var err error
		arrivals, _, err = w.Prequeued(context.Background(), eventID)
		return err
	})
	return arrivals
}

func expectPrequeued(t *testing.T, p ports.QueuePlace, created bool, what string) {
	t.Helper()
	if !p.Prequeue || p.Admitted || p.Created != created {
		t.Fatalf("%s: %+v, want a pre-queue place (created %v)", what, p, created)
	}
}

// line is every user's rank, by Position.
func line(t *testing.T, w PushRoom, eventID string, users []string) []string {
	t.Helper()
	got := make([]string, len(users))
	for _, u := range users {
		p := position(t, w, eventID, u)
		if p.Prequeue || p.Admitted || p.Rank >= len(users) {
			t.Fatalf("%s: %+v", u, p)
		}
		got[p.Rank] = u
	}
	return got
}

func testPrequeueClosed(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openGated(t, e.impl, 2, time.Hour)
	expectPrequeued(t, enter(t, e.impl, eventID, "a"), true, "first entry")
	expectPrequeued(t, enter(t, e.impl, eventID, "a"), false, "repeated entry")
	place, err := e.impl.Connect(ctx, eventID, "b", "broker-1|1|")
	must(t, err, "connect")
	expectPrequeued(t, place, true, "push entry")
	expectPrequeued(t, position(t, e.impl, eventID, "a"), false, "position")
	res := claim(t, e.impl, eventID, "a", longTokenTTL)
	if res.Claimed || !res.Place.Prequeue {
		t.Fatalf("claim in the pre-queue: %+v", res)
	}
	promoted, _, err := e.impl.Promote(ctx, eventID, longTokenTTL, ports.EntryRead{})
	must(t, err, "promote")
	expectEqual(t, promoted, 0, "promoted before opensAt")
	snap, err := e.impl.Snapshot(ctx, eventID)
	must(t, err, "snapshot")
	if !snap.Prequeue || len(snap.Waiting) != 0 {
		t.Fatalf("snapshot before opensAt: %+v", snap)
	}
	_, _, err = e.impl.Prequeued(ctx, eventID)
	expectIs(t, err, ports.ErrPrequeueNotDue, "read before opensAt")
	_, err = e.impl.PlacePrequeue(ctx, eventID, []string{"a", "b"})
	expectIs(t, err, ports.ErrPrequeueNotDue, "place before opensAt")
	_, _, err = e.impl.OpenPrequeue(ctx, eventID)
	expectIs(t, err, ports.ErrPrequeueNotDue, "open before opensAt")
	opened, err := e.impl.PrequeueOpened(ctx, eventID)
	must(t, err, "opened")
	expectEqual(t, opened, false, "opened before opensAt")
	st := stats(t, e.impl, eventID)
	expectEqual(t, st.Prequeued, 2, "pre-queued")
	expectEqual(t, st.Waiting, 0, "waiting beside the pre-queue")
	expectEqual(t, st.Admitted, 0, "admitted")
	expectEqual(t, st.Gated, true, "gated before opensAt")
	events, err := e.impl.Events(ctx)
	must(t, err, "events")
	expectEqual(t, slices.Contains(events, eventID), true, "indexed")
	departed, err := e.impl.Disconnect(ctx, eventID, "b", "broker-1|")
	must(t, err, "disconnect")
	expectEqual(t, departed, ports.Removed, "a pre-queued push user leaves")
	expectEqual(t, stats(t, e.impl, eventID).Prequeued, 1, "pre-queued after the departure")
}

func testPrequeuePlace(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openGated(t, e.impl, 2, opensSoon)
	early := users(10)
	for _, u := range early {
		expectPrequeued(t, enter(t, e.impl, eventID, u), true, "early entry")
	}
	arrivals := awaitOpensAt(t, e.impl, eventID)
	expectEqual(t, fmt.Sprint(arrivals), fmt.Sprint(early), "the pre-queue by arrival")
	expectPrequeued(t, enter(t, e.impl, eventID, "late-1"), true, "a later arrival before the placing")
	expectPrequeued(t, enter(t, e.impl, eventID, "late-0"), true, "another later arrival")
	arrivals, _, err := e.impl.Prequeued(ctx, eventID)
	must(t, err, "read the pre-queue again")
	expectEqual(t, fmt.Sprint(arrivals), fmt.Sprint(early), "later arrivals are not in the pre-queue")

	order := slices.Clone(early)
	slices.Reverse(order)
	placed, err := e.impl.PlacePrequeue(ctx, eventID, order[:4])
	must(t, err, "place a first step")
	expectEqual(t, placed, 4, "placed by the first step")
	expectClosed(t, e.impl, eventID, order[0], len(early))
	expectEqual(t, stats(t, e.impl, eventID).Waiting, 2, "waiting part-way: the later arrivals, not the placed")
	remaining, _, err := e.impl.Prequeued(ctx, eventID)
	must(t, err, "read the pre-queue part-way")
	expectEqual(t, fmt.Sprint(remaining), fmt.Sprint(early[:6]), "the users not placed yet, by arrival")
	placed, err = e.impl.PlacePrequeue(ctx, eventID, order)
	must(t, err, "place the rest")
	expectEqual(t, placed, len(early)-4, "placed by the second step")
	expectClosed(t, e.impl, eventID, order[0], len(early))
	placed, opened, err := e.impl.OpenPrequeue(ctx, eventID)
	must(t, err, "open")
	expectEqual(t, placed, 0, "left for the opening")
	expectEqual(t, opened, true, "this call opened")
	placed, opened, err = e.impl.OpenPrequeue(ctx, eventID)
	must(t, err, "open again")
	expectEqual(t, placed, 0, "placed by a second opening")
	expectEqual(t, opened, false, "a second opening")
	placed, err = e.impl.PlacePrequeue(ctx, eventID, early)
	must(t, err, "place after opening")
	expectEqual(t, placed, 0, "placed after opening")
	nowOpen, err := e.impl.PrequeueOpened(ctx, eventID)
	must(t, err, "opened")
	expectEqual(t, nowOpen, true, "opened after placing")
	_, alreadyOpened, err := e.impl.Prequeued(ctx, eventID)
	must(t, err, "read after placing")
	expectEqual(t, alreadyOpened, true, "read after placing")

	st := stats(t, e.impl, eventID)
	expectEqual(t, [2]int{st.Waiting, st.Prequeued}, [2]int{len(early) + 2, 0}, "waiting and pre-queued once opened")
	expectEqual(t, st.Gated, false, "gated once opened")
	want := append(order, "late-1", "late-0")
	expectEqual(t, fmt.Sprint(line(t, e.impl, eventID, want)), fmt.Sprint(want), "the line")
	if !enter(t, e.impl, eventID, "late-2").Created {
		t.Fatal("an entry after the placing was not queued")
	}
	expectEqual(t, position(t, e.impl, eventID, "late-2").Rank, len(want), "an entry after the placing")
	expectEqual(t, claim(t, e.impl, eventID, order[1], longTokenTTL).Claimed, true, "the second placed user claims")
	expectEqual(t, claim(t, e.impl, eventID, order[2], longTokenTTL).Claimed, false, "the third placed user, with two slots")
	promoted, _, err := e.impl.Promote(ctx, eventID, longTokenTTL, ports.EntryRead{})
	must(t, err, "promote")
	expectEqual(t, promoted, 1, "the dispatcher promotes the head into the last slot")
}

// expectClosed: while placing, the room stays closed — a placed user has no rank, nobody is
// admitted, and every pre-queued user still counts as one.
func expectClosed(t *testing.T, w PushRoom, eventID, placedUser string, prequeued int) {
	t.Helper()
	ctx := context.Background()
	expectPrequeued(t, position(t, w, eventID, placedUser), false, "a placed user before the opening")
	if res := claim(t, w, eventID, placedUser, longTokenTTL); res.Claimed || !res.Place.Prequeue {
		t.Fatalf("claim before the opening: %+v", res)
	}
	promoted, _, err := w.Promote(ctx, eventID, longTokenTTL, ports.EntryRead{})
	must(t, err, "promote")
	expectEqual(t, promoted, 0, "promoted before the opening")
	opened, err := w.PrequeueOpened(ctx, eventID)
	must(t, err, "opened")
	expectEqual(t, opened, false, "opened before the opening")
	expectEqual(t, stats(t, w, eventID).Prequeued, prequeued, "pre-queued before the opening")
}

// drawOrder is a deterministic order of "user-N" names unlike arrival (N rotated by 7), the
// same for any subset, as a placer's draw order is.
func drawOrder(users []string) []string {
	order := slices.Clone(users)
	slices.SortFunc(order, func(a, b string) int { return cmpRotated(a, b, 7, 50) })
	return order
}

func testPrequeueConcurrentPlacers(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openGated(t, e.impl, 1, opensSoon)
	early := users(50)
	for _, u := range early {
		enter(t, e.impl, eventID, u)
	}
	awaitOpensAt(t, e.impl, eventID)
	const placers = 8
	var placed, openers atomic.Int32
	errs := make([]error, placers)
	testkit.StartTogether(placers, func(i int) {
		// Each placer reads and orders for itself, in steps of its own size, as instances do.
		remaining, _, err := e.impl.Prequeued(ctx, eventID)
		if err != nil {
			errs[i] = err
			return
		}
		for step := range slices.Chunk(drawOrder(remaining), i+1) {
			n, err := e.impl.PlacePrequeue(ctx, eventID, step)
			if err != nil {
				errs[i] = err
				return
			}
			placed.Add(int32(n))
		}
		n, opened, err := e.impl.OpenPrequeue(ctx, eventID)
		errs[i] = err
		placed.Add(int32(n))
		if opened {
			openers.Add(1)
		}
	})
	must(t, errors.Join(errs...), "place")
	expectEqual(t, openers.Load(), int32(1), "placers that opened")
	expectEqual(t, placed.Load(), int32(len(early)), "users placed across placers")
	want := drawOrder(early)
	expectEqual(t, fmt.Sprint(line(t, e.impl, eventID, want)), fmt.Sprint(want), "the line")
}

func testPrequeueStoppedPlacer(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openGated(t, e.impl, 1, opensSoon)
	early := users(50)
	for _, u := range early {
		enter(t, e.impl, eventID, u)
	}
	arrivals := awaitOpensAt(t, e.impl, eventID)
	enter(t, e.impl, eventID, "late")
	order := drawOrder(arrivals)
	for _, step := range [][]string{order[:10], order[10:23]} { // then it stops
		_, err := e.impl.PlacePrequeue(ctx, eventID, step)
		must(t, err, "the first placer's step")
	}
	expectClosed(t, e.impl, eventID, order[0], len(early))
	remaining, _, err := e.impl.Prequeued(ctx, eventID)
	must(t, err, "the next placer reads")
	expectEqual(t, len(remaining), len(early)-23, "users left to place")
	placed, err := e.impl.PlacePrequeue(ctx, eventID, drawOrder(remaining))
	must(t, err, "the next placer places")
	expectEqual(t, placed, len(remaining), "placed by the next placer")
	_, opened, err := e.impl.OpenPrequeue(ctx, eventID)
	must(t, err, "the next placer opens")
	expectEqual(t, opened, true, "the next placer opened")
	want := append(order, "late")
	expectEqual(t, fmt.Sprint(line(t, e.impl, eventID, want)), fmt.Sprint(want), "the line, as one placer would have made it")
}

// cmpRotated orders "user-N" names by N rotated by shift.
func cmpRotated(a, b string, shift, n int) int {
	var x, y int
	_, _ = fmt.Sscanf(a, "user-%d", &x)
	_, _ = fmt.Sscanf(b, "user-%d", &y)
	return (x+shift)%n - (y+shift)%n
}

func testPrequeueLeavers(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openGated(t, e.impl, 1, opensSoon)
	for _, u := range []string{"kept", "idle", "missing", "polling"} {
		enter(t, e.impl, eventID, u)
	}
	const idle = 500 * time.Millisecond
	time.Sleep(2 * idle)
	for _, u := range []string{"kept", "missing", "polling"} {
		expectPrequeued(t, position(t, e.impl, eventID, u), false, "poll "+u)
	}
	done, err := e.impl.Reconcile(ctx, eventID, idle, longRetention)
	must(t, err, "reconcile")
	expectEqual(t, done.Dropped, 1, "idle pre-queued users dropped")
	awaitOpensAt(t, e.impl, eventID)
	enter(t, e.impl, eventID, "late")
	placed, err := e.impl.PlacePrequeue(ctx, eventID, []string{"polling", "idle", "kept"})
	must(t, err, "place")
	expectEqual(t, placed, 2, "placed users")
	placed, opened, err := e.impl.OpenPrequeue(ctx, eventID)
	must(t, err, "open")
	expectEqual(t, opened, true, "opened")
	expectEqual(t, placed, 1, "users the order missed")
	want := []string{"polling", "kept", "missing", "late"}
	expectEqual(t, fmt.Sprint(line(t, e.impl, eventID, want)), fmt.Sprint(want), "the line")
	_, err = e.impl.Position(ctx, eventID, "idle", longTokenTTL, 0)
	expectIs(t, err, ports.ErrNotQueued, "the dropped user")
}

func testPrequeueLeave(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openGated(t, e.impl, 1, time.Hour)
	enter(t, e.impl, eventID, "stays")
	enter(t, e.impl, eventID, "leaves")
	must(t, e.impl.Leave(ctx, eventID, "leaves"), "leave the pre-queue")
	_, err := e.impl.Position(ctx, eventID, "leaves", longTokenTTL, 0)
	expectIs(t, err, ports.ErrNotQueued, "the user who left the pre-queue")
	expectPrequeued(t, position(t, e.impl, eventID, "stays"), false, "the user who stayed")
	expectEqual(t, stats(t, e.impl, eventID).Prequeued, 1, "pre-queued")
}

func testPrequeueEntryKeepsRoom(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openGated(t, e.impl, 1, time.Hour)
	_, err := e.impl.Reconcile(ctx, eventID, 0, longRetention)
	must(t, err, "reconcile the empty room")
	expectPrequeued(t, enter(t, e.impl, eventID, "a"), true, "a's entry")
	must(t, e.impl.Leave(ctx, eventID, "a"), "a leaves the pre-queue")
	emptyAgainForgotten(t, e.impl, eventID)
}

func testPrequeueUngated(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 1)
	enter(t, e.impl, eventID, "a")
	opened, err := e.impl.PrequeueOpened(ctx, eventID)
	must(t, err, "opened")
	expectEqual(t, opened, true, "a room without a pre-queue is open")
	_, opened, err = e.impl.Prequeued(ctx, eventID)
	must(t, err, "read")
	expectEqual(t, opened, true, "read a room without a pre-queue")
	placed, err := e.impl.PlacePrequeue(ctx, eventID, []string{"a"})
	must(t, err, "place")
	expectEqual(t, placed, 0, "placed in a room without a pre-queue")
	placed, opened, err = e.impl.OpenPrequeue(ctx, eventID)
	must(t, err, "open")
	if placed != 0 || opened {
		t.Fatalf("opening a room without a pre-queue: %d, %v", placed, opened)
	}
	expectEqual(t, position(t, e.impl, eventID, "a").Rank, 0, "rank")
}
