package porttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

const (
	longTokenTTL = time.Minute
	// shortTokenTTL expires quickly yet outlasts a few round trips under -race on a loaded
	// machine (CI runs every package at once on two cores).
	shortTokenTTL = 1500 * time.Millisecond
	// expiryBound is how long a test waits for an expired token's slot (or an emptied room) to
	// go.
	expiryBound = 10 * time.Second
	// longRetention keeps a room a case empties for longer than the case runs; shortRetention
	// lets a case see an emptied room expire.
	longRetention  = time.Hour
	shortRetention = 300 * time.Millisecond
)

// TestWaitingRoom checks ports.WaitingRoom: entries are FIFO by arrival under 1,000
// concurrent entries and a duplicate entry keeps its place; ranks and remaining slots are
// exact; Claim admits only within the remaining slots, and never more tokens than slots are
// alive under 1,000 concurrent pollers and claimers; an expired token frees its slot and stops
// verifying; a returned token frees its slot once, even when returned twice; a waiting user who
// leaves is out of the line, with the wait estimate, and an admitted one keeps the slot; Position refreshes
// an admitted user's token; idle waiting users are dropped, and a poll within the sign step of
// the last recorded sign of life records none; SetSlots recalibrates without a
// leak, and ResetSlots sets the slots only from the value they hold; the index of events
// follows rooms in use; the seat counter counts; and a room that was never opened is
// ports.ErrRoomNotOpen; a room a pass found empty is forgotten after the retention, unless a
// user enters it, its slots change or it is opened again before, and opened again once
// forgotten it starts afresh.
func TestWaitingRoom(t *testing.T, newRoom func(t *testing.T) ports.WaitingRoom, caps Capabilities) {
	run(t, newRoom, caps, []testCase[ports.WaitingRoom]{
		{"Enter_FIFOUnderConcurrentEntries", testEnterFIFO},
		{"Enter_DuplicateKeepsPlace", testEnterDuplicate},
		{"Enter_AdmittedUserIsAnsweredAdmitted", testEnterAdmitted},
		{"Position_RanksAndRemainingSlotsAreExact", testPositionExact},
		{"Position_NotQueued", testPositionNotQueued},
		{"Claim_OnlyWithinRemainingSlots", testClaimWithinRemaining},
		{"Claim_ConcurrentClaimersNeverExceedSlots", testClaimConcurrent},
		{"Claim_PollersAndClaimersWithCheckoutNeverExceedSlots", testClaimPollersWithCheckout},
		{"Expiry_FreesSlotOnceAndTokenStopsVerifying", testExpiryFreesSlot},
		{"Release_TwiceFreesOnce", testReleaseTwice},
		{"Leave_TakesAWaitingUserOutOfTheLine", testLeave},
		{"Position_RefreshesAdmittedToken", testPositionRefreshes},
		{"Verify_OnlyTheUsersTokenOfTheEvent", testVerify},
		{"Reconcile_DropsIdleWaitingUsers", testReconcileDropsIdle},
		{"Position_RecordsASignOfLifeOnlyOnceAStep", testPositionSignStep},
		{"SetSlots_RecalibratesWithoutLeak", testSetSlots},
		{"ResetSlots_OnlyFromTheSlotsHeld", testResetSlots},
		{"Events_IndexFollowsRoomsInUse", testEventsIndex},
		{"Reconcile_AnEmptyRoomIsForgottenAfterTheRetention", testEmptyRoomExpires},
		{"Reconcile_AnEntryKeepsAnEmptiedRoom", testEntryKeepsRoom},
		{"Reconcile_ASlotChangeKeepsAnEmptiedRoom", testSlotChangeKeepsRoom},
		{"Reconcile_AnOpenKeepsAnEmptiedRoom", testOpenKeepsRoom},
		{"Seats_CounterCounts", testSeatCounter},
		{"Open_TwiceKeepsTheRoom", testOpenTwice},
		{"RoomNotOpen", testRoomNotOpen},
	})
}

// openRoom opens a room with a random event id and returns the id.
func openRoom(t *testing.T, w ports.WaitingRoom, slots, seats int) string {
	t.Helper()
	eventID := "event-" + randomID()
	must(t, w.Open(context.Background(), eventID, slots, seats), "open room")
	return eventID
}

func enter(t *testing.T, w ports.WaitingRoom, eventID, userID string) ports.QueuePlace {
	t.Helper()
	place, err := w.Enter(context.Background(), eventID, userID)
	must(t, err, "enter "+userID)
	return place
}

func position(t *testing.T, w ports.WaitingRoom, eventID, userID string) ports.QueuePlace {
	t.Helper()
	place, err := w.Position(context.Background(), eventID, userID, longTokenTTL, 0)
	must(t, err, "position of "+userID)
	return place
}

func claim(t *testing.T, w ports.WaitingRoom, eventID, userID string, ttl time.Duration) ports.ClaimResult {
	t.Helper()
	res, err := w.Claim(context.Background(), eventID, userID, "token-"+randomID(), ttl)
	must(t, err, "claim of "+userID)
	return res
}

func stats(t *testing.T, w ports.WaitingRoom, eventID string) ports.RoomStats {
	t.Helper()
	s, err := w.Stats(context.Background(), eventID)
	must(t, err, "stats")
	return s
}

func users(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("user-%04d", i)
	}
	return ids
}

func testEnterFIFO(t *testing.T, e env[ports.WaitingRoom]) {
	const n = 1000
	eventID := openRoom(t, e.impl, 1, 1)
	ids := users(n)
	places := make([]ports.QueuePlace, n)
	errs := startTogether(n, func(i int) error {
		var err error
		places[i], err = e.impl.Enter(context.Background(), eventID, ids[i])
		return err
	})
	seen := make([]bool, n)
	for i, err := range errs {
		must(t, err, "enter")
		if !places[i].Created {
			t.Errorf("%s: first entry not Created", ids[i])
		}
		// Nobody left, so the rank at entry is the rank now: everyone who entered later is behind.
		now := position(t, e.impl, eventID, ids[i])
		expectEqual(t, now.Rank, places[i].Rank, ids[i]+" rank now vs at entry")
		if r := places[i].Rank; r < 0 || r >= n || seen[r] {
			t.Fatalf("%s: rank %d is out of range or taken twice", ids[i], r)
		}
		seen[places[i].Rank] = true
	}
	expectEqual(t, stats(t, e.impl, eventID).Waiting, n, "waiting")
}

func testEnterDuplicate(t *testing.T, e env[ports.WaitingRoom]) {
	eventID := openRoom(t, e.impl, 1, 1)
	for _, u := range []string{"a", "b", "c"} {
		enter(t, e.impl, eventID, u)
	}
	again := enter(t, e.impl, eventID, "a")
	expectEqual(t, again.Rank, 0, "a's rank after entering again")
	expectEqual(t, again.Created, false, "second entry Created")
	expectEqual(t, position(t, e.impl, eventID, "c").Rank, 2, "c's rank")
	expectEqual(t, stats(t, e.impl, eventID).Waiting, 3, "waiting")
}

func testEnterAdmitted(t *testing.T, e env[ports.WaitingRoom]) {
	eventID := openRoom(t, e.impl, 1, 1)
	enter(t, e.impl, eventID, "a")
	claimed := claim(t, e.impl, eventID, "a", longTokenTTL)
	again := enter(t, e.impl, eventID, "a")
	expectEqual(t, again.Admitted, true, "admitted user entering again")
	expectEqual(t, again.ExpiresAt.Equal(claimed.ExpiresAt), true, "expiry unchanged by Enter")
	expectEqual(t, stats(t, e.impl, eventID).Waiting, 0, "waiting")
}

func testPositionExact(t *testing.T, e env[ports.WaitingRoom]) {
	eventID := openRoom(t, e.impl, 2, 10)
	ids := users(5)
	for i, u := range ids {
		p := enter(t, e.impl, eventID, u)
		expectEqual(t, p.Rank, i, u+" rank at entry")
		expectEqual(t, p.RemainingSlots, 2, "remaining slots")
	}
	expectEqual(t, claim(t, e.impl, eventID, ids[0], longTokenTTL).Claimed, true, "head claims")
	for i, u := range ids[1:] {
		p := position(t, e.impl, eventID, u)
		expectEqual(t, p.Rank, i, u+" rank after the head left the queue")
		expectEqual(t, p.RemainingSlots, 1, "remaining slots")
		expectEqual(t, p.Ready(), i == 0, u+" ready")
	}
	admitted := position(t, e.impl, eventID, ids[0])
	expectEqual(t, admitted.Admitted, true, "the claimer is admitted")
	expectEqual(t, admitted.Rank, 0, "an admitted user's rank")
}

func testPositionNotQueued(t *testing.T, e env[ports.WaitingRoom]) {
	eventID := openRoom(t, e.impl, 1, 1)
	_, err := e.impl.Position(context.Background(), eventID, "nobody", longTokenTTL, 0)
	expectIs(t, err, ports.ErrNotQueued, "position of a user who never entered")
	_, err = e.impl.Claim(context.Background(), eventID, "nobody", "t", longTokenTTL)
	expectIs(t, err, ports.ErrNotQueued, "claim of a user who never entered")
}

func testClaimWithinRemaining(t *testing.T, e env[ports.WaitingRoom]) {
	eventID := openRoom(t, e.impl, 2, 10)
	ids := users(4)
	for _, u := range ids {
		enter(t, e.impl, eventID, u)
	}
	early := claim(t, e.impl, eventID, ids[2], longTokenTTL)
	expectEqual(t, early.Claimed, false, "rank 2 of 2 slots claims")
	expectEqual(t, early.Place.Rank, 2, "its rank")
	first := claim(t, e.impl, eventID, ids[0], longTokenTTL)
	expectEqual(t, first.Claimed && first.Created, true, "rank 0 claims")
	again := claim(t, e.impl, eventID, ids[0], longTokenTTL)
	expectEqual(t, again.Claimed && !again.Created, true, "claiming again answers the held token")
	expectEqual(t, again.Token, first.Token, "the held token")
	expectEqual(t, claim(t, e.impl, eventID, ids[1], longTokenTTL).Claimed, true, "rank 1 claims")
	late := claim(t, e.impl, eventID, ids[2], longTokenTTL)
	expectEqual(t, late.Claimed, false, "head of the queue with no slot left claims")
	expectEqual(t, late.Place.Rank, 0, "its rank")
	expectEqual(t, late.Place.RemainingSlots, 0, "remaining slots")
	s := stats(t, e.impl, eventID)
	expectEqual(t, s.Admitted, 2, "admitted")
	expectEqual(t, s.Claims, int64(2), "claims")
}

func testClaimConcurrent(t *testing.T, e env[ports.WaitingRoom]) {
	const n, slots = 1000, 50
	eventID := openRoom(t, e.impl, slots, slots)
	ids := users(n)
	for _, u := range ids {
		enter(t, e.impl, eventID, u)
	}
	var claimed atomic.Int32
	errs := startTogether(n, func(i int) error {
		res, err := e.impl.Claim(context.Background(), eventID, ids[i], "token-"+ids[i], longTokenTTL)
		if res.Claimed {
			claimed.Add(1)
			if i >= slots {
				return fmt.Errorf("%s at rank %d was admitted", ids[i], i)
			}
		}
		return err
	})
	for _, err := range errs {
		must(t, err, "claim")
	}
	expectEqual(t, int(claimed.Load()), slots, "tokens claimed")
	expectEqual(t, stats(t, e.impl, eventID).Admitted, slots, "tokens alive")
}

// testClaimPollersWithCheckout is the pull mode under load: 1,000 users poll and claim with 50
// slots while each admitted user's checkout returns the token. A sampler watches the tokens
// alive; every user must get in, in order, and never more than 50 at once.
func testClaimPollersWithCheckout(t *testing.T, e env[ports.WaitingRoom]) {
	const n, slots = 1000, 50
	ctx := context.Background()
	eventID := openRoom(t, e.impl, slots, slots)
	ids := users(n)
	for _, u := range ids {
		enter(t, e.impl, eventID, u)
	}
	var holding, maxHolding atomic.Int32
	var mu sync.Mutex
	var order []string
	stop := make(chan struct{})
	sampled := make(chan int)
	go func() {
		peak := 0
		defer func() { sampled <- peak }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if s, err := e.impl.Stats(ctx, eventID); err == nil {
				peak = max(peak, s.Admitted)
			}
		}
	}()
	errs := startTogether(n, func(i int) error {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
			place, err := e.impl.Position(ctx, eventID, ids[i], longTokenTTL, 0)
			if err != nil {
				return err
			}
			if !place.Ready() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			res, err := e.impl.Claim(ctx, eventID, ids[i], "token-"+ids[i], longTokenTTL)
			if err != nil || !res.Claimed {
				if err != nil {
					return err
				}
				continue
			}
			mu.Lock()
			order = append(order, ids[i])
			mu.Unlock()
			// The checkout: the user holds the token a moment, then returns it.
			for h := holding.Add(1); ; {
				if peak := maxHolding.Load(); h <= peak || maxHolding.CompareAndSwap(peak, h) {
					break
				}
			}
			time.Sleep(time.Millisecond)
			holding.Add(-1)
			freed, err := e.impl.Release(ctx, eventID, ids[i])
			if err != nil || !freed {
				return errors.Join(err, fmt.Errorf("%s: release freed nothing", ids[i]))
			}
			return nil
		}
		return fmt.Errorf("%s was never admitted", ids[i])
	})
	close(stop)
	peak := <-sampled
	for _, err := range errs {
		must(t, err, "poll and claim")
	}
	if peak > slots || int(maxHolding.Load()) > slots {
		t.Errorf("tokens alive peaked at %d (clients saw %d), more than %d slots", peak, maxHolding.Load(), slots)
	}
	// Admission is FIFO up to the slot window: nobody gets in before a user more than `slots`
	// places ahead of them.
	for k, u := range order {
		rank := slices.Index(ids, u)
		if rank > k+slots {
			t.Errorf("%s (entered %dth) was admitted %dth", u, rank, k)
		}
	}
	s := stats(t, e.impl, eventID)
	expectEqual(t, s.Claims, int64(n), "claims")
	expectEqual(t, s.Released, int64(n), "released")
	expectEqual(t, s.RemainingSlots, slots, "remaining slots at the end")
}

// waitForSlots polls until the room has want remaining slots or expiryBound passes.
func waitForSlots(t *testing.T, w ports.WaitingRoom, eventID string, want int) {
	t.Helper()
	testkit.Eventually(t, expiryBound, fmt.Sprintf("%d slots remaining", want), func() error {
		if got := stats(t, w, eventID).RemainingSlots; got != want {
			return fmt.Errorf("%d remaining", got)
		}
		return nil
	})
}

func testExpiryFreesSlot(t *testing.T, e env[ports.WaitingRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 2, 10)
	for _, u := range []string{"a", "b", "c"} {
		enter(t, e.impl, eventID, u)
	}
	a := claim(t, e.impl, eventID, "a", shortTokenTTL)
	claim(t, e.impl, eventID, "b", shortTokenTTL)
	expectEqual(t, claim(t, e.impl, eventID, "c", longTokenTTL).Claimed, false, "c while both slots are taken")

	waitForSlots(t, e.impl, eventID, 2)
	expectEqual(t, claim(t, e.impl, eventID, "c", longTokenTTL).Claimed, true, "c after both tokens expired")
	valid, seats, err := e.impl.Verify(ctx, eventID, "a", a.Token)
	must(t, err, "verify")
	expectEqual(t, valid, false, "an expired token verifies")
	expectEqual(t, seats, 10, "seat counter")
	freed, err := e.impl.Release(ctx, eventID, "a")
	must(t, err, "release")
	expectEqual(t, freed, false, "returning an expired token freed a slot")
	s := stats(t, e.impl, eventID)
	expectEqual(t, s.Expired, int64(2), "expired")
	expectEqual(t, s.RemainingSlots, 1, "remaining slots")
	_, err = e.impl.Position(ctx, eventID, "a", longTokenTTL, 0)
	expectIs(t, err, ports.ErrNotQueued, "position after the token expired")
}

func testReleaseTwice(t *testing.T, e env[ports.WaitingRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 10)
	enter(t, e.impl, eventID, "a")
	enter(t, e.impl, eventID, "b")
	claim(t, e.impl, eventID, "a", longTokenTTL)
	results := startTogether(2, func(int) error {
		freed, err := e.impl.Release(ctx, eventID, "a")
		if err == nil && !freed {
			return ports.ErrNotQueued // marks "freed nothing" for expectOneWinner
		}
		return err
	})
	expectOneWinner(t, results, ports.ErrNotQueued)
	expectEqual(t, claim(t, e.impl, eventID, "b", longTokenTTL).Claimed, true, "b takes the freed slot")
	freed, err := e.impl.Release(ctx, eventID, "a")
	must(t, err, "third release")
	expectEqual(t, freed, false, "a third release freed b's slot")
	s := stats(t, e.impl, eventID)
	expectEqual(t, s.Admitted, 1, "admitted")
	expectEqual(t, s.RemainingSlots, 0, "remaining slots")
	expectEqual(t, s.Released, int64(1), "released")
}

func testLeave(t *testing.T, e env[ports.WaitingRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 10)
	for _, u := range []string{"a", "b", "c", "d"} {
		enter(t, e.impl, eventID, u)
	}
	claim(t, e.impl, eventID, "a", longTokenTTL)
	must(t, e.impl.Predict(ctx, eventID, map[string]int{"b": 5}), "predict b's wait")
	for range 2 { // leaving twice is leaving once
		must(t, e.impl.Leave(ctx, eventID, "b"), "b leaves")
	}
	_, err := e.impl.Position(ctx, eventID, "b", longTokenTTL, 0)
	expectIs(t, err, ports.ErrNotQueued, "the user who left")
	expectEqual(t, position(t, e.impl, eventID, "c").Rank, 0, "c's rank once b left")
	expectEqual(t, position(t, e.impl, eventID, "d").Rank, 1, "d's rank once b left")
	must(t, e.impl.Leave(ctx, eventID, "a"), "the admitted user leaves the line")
	must(t, e.impl.Leave(ctx, eventID, "nobody"), "a user who never entered leaves")
	s := stats(t, e.impl, eventID)
	expectEqual(t, s.Waiting, 2, "waiting")
	expectEqual(t, s.Admitted, 1, "admitted: leaving the line is not giving the slot back")
	expectEqual(t, position(t, e.impl, eventID, "a").Admitted, true, "a still admitted")

	// b enters again at the back, without the estimate given before leaving: its admission
	// leaves no wait error.
	expectEqual(t, enter(t, e.impl, eventID, "b").Rank, 2, "b's rank on entering again")
	_, err = e.impl.Release(ctx, eventID, "a")
	must(t, err, "release a")
	must(t, e.impl.Leave(ctx, eventID, "c"), "c leaves")
	must(t, e.impl.Leave(ctx, eventID, "d"), "d leaves")
	expectEqual(t, claim(t, e.impl, eventID, "b", longTokenTTL).Claimed, true, "b claims")
	waits, err := e.impl.WaitErrors(ctx, eventID)
	must(t, err, "wait errors")
	expectEqual(t, len(waits), 0, "wait errors after b's admission")
}

func testPositionRefreshes(t *testing.T, e env[ports.WaitingRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 1)
	enter(t, e.impl, eventID, "a")
	c := claim(t, e.impl, eventID, "a", shortTokenTTL)
	p, err := e.impl.Position(ctx, eventID, "a", longTokenTTL, 0)
	must(t, err, "position")
	if !p.ExpiresAt.After(c.ExpiresAt.Add(longTokenTTL / 2)) {
		t.Fatalf("expiry %v not extended past %v", p.ExpiresAt, c.ExpiresAt)
	}
	time.Sleep(2 * shortTokenTTL)
	valid, _, err := e.impl.Verify(ctx, eventID, "a", c.Token)
	must(t, err, "verify")
	expectEqual(t, valid, true, "a refreshed token after its first TTL")
}

func testVerify(t *testing.T, e env[ports.WaitingRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 2, 2)
	other := openRoom(t, e.impl, 2, 2)
	enter(t, e.impl, eventID, "a")
	enter(t, e.impl, eventID, "b")
	enter(t, e.impl, other, "a")
	a := claim(t, e.impl, eventID, "a", longTokenTTL)
	claim(t, e.impl, eventID, "b", longTokenTTL)
	claim(t, e.impl, other, "a", longTokenTTL)
	for _, tc := range []struct {
		name, event, user, token string
		want                     bool
	}{
		{"own token", eventID, "a", a.Token, true},
		{"another user's", eventID, "b", a.Token, false},
		{"another event's", other, "a", a.Token, false},
		{"made up", eventID, "a", "nonsense", false},
		{"empty", eventID, "a", "", false},
	} {
		valid, _, err := e.impl.Verify(ctx, tc.event, tc.user, tc.token)
		must(t, err, tc.name)
		expectEqual(t, valid, tc.want, tc.name)
	}
}

// idleForTests is an idle timeout the waiting-room cases outlast with a sleep, yet one that a busy
// runner's pause between a case's poll and its reconciliation does not (at 500 ms one did).
const idleForTests = 2 * time.Second

func testReconcileDropsIdle(t *testing.T, e env[ports.WaitingRoom]) {
	const idle = idleForTests
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 1)
	enter(t, e.impl, eventID, "gone")
	enter(t, e.impl, eventID, "polling")
	time.Sleep(2 * idle)
	position(t, e.impl, eventID, "polling")
	done, err := e.impl.Reconcile(ctx, eventID, idle, longRetention)
	must(t, err, "reconcile")
	expectEqual(t, done.Dropped, 1, "dropped")
	expectEqual(t, position(t, e.impl, eventID, "polling").Rank, 0, "the poller moved to the head")
	_, err = e.impl.Position(ctx, eventID, "gone", longTokenTTL, 0)
	expectIs(t, err, ports.ErrNotQueued, "the idle user")
	expectEqual(t, stats(t, e.impl, eventID).Dropped, int64(1), "dropped counter")
}

func testPositionSignStep(t *testing.T, e env[ports.WaitingRoom]) {
	const idle = idleForTests
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 1)
	enter(t, e.impl, eventID, "within-step")
	enter(t, e.impl, eventID, "past-step")
	time.Sleep(2 * idle)
	// Both signs of life are 2×idle old: within an hour's step, past an idle's.
	_, err := e.impl.Position(ctx, eventID, "within-step", longTokenTTL, time.Hour)
	must(t, err, "poll within the step")
	_, err = e.impl.Position(ctx, eventID, "past-step", longTokenTTL, idle)
	must(t, err, "poll past the step")
	done, err := e.impl.Reconcile(ctx, eventID, idle, longRetention)
	must(t, err, "reconcile")
	expectEqual(t, done.Dropped, 1, "dropped")
	_, err = e.impl.Position(ctx, eventID, "within-step", longTokenTTL, 0)
	expectIs(t, err, ports.ErrNotQueued, "the user whose poll recorded no sign of life")
	expectEqual(t, position(t, e.impl, eventID, "past-step").Rank, 0, "the user whose poll recorded one")
}

func testSetSlots(t *testing.T, e env[ports.WaitingRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 3, 3)
	ids := users(3)
	for _, u := range ids {
		enter(t, e.impl, eventID, u)
		claim(t, e.impl, eventID, u, longTokenTTL)
	}
	remaining, err := e.impl.SetSlots(ctx, eventID, 1)
	must(t, err, "shrink")
	expectEqual(t, remaining, 0, "remaining after shrinking below the tokens alive")
	for i, u := range ids {
		_, err := e.impl.Release(ctx, eventID, u)
		must(t, err, "release")
		want := 0
		if i == 2 {
			want = 1
		}
		expectEqual(t, stats(t, e.impl, eventID).RemainingSlots, want, fmt.Sprintf("remaining after %d returns", i+1))
	}
	remaining, err = e.impl.SetSlots(ctx, eventID, 5)
	must(t, err, "grow")
	expectEqual(t, remaining, 5, "remaining after growing")
	expectEqual(t, stats(t, e.impl, eventID).Slots, 5, "slots")
}

func testResetSlots(t *testing.T, e env[ports.WaitingRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 3, 5)
	enter(t, e.impl, eventID, "a")
	claim(t, e.impl, eventID, "a", longTokenTTL)
	reset, err := e.impl.ResetSlots(ctx, eventID, 2, 1)
	must(t, err, "reset from a stale value")
	expectEqual(t, reset, false, "reset from a value the slots no longer hold")
	expectEqual(t, stats(t, e.impl, eventID).Slots, 3, "slots after a refused reset")
	reset, err = e.impl.ResetSlots(ctx, eventID, 3, 1)
	must(t, err, "reset")
	expectEqual(t, reset, true, "reset from the value the slots hold")
	st := stats(t, e.impl, eventID)
	expectEqual(t, st.Slots, 1, "slots after the reset")
	expectEqual(t, st.RemainingSlots, 0, "remaining slots with the one token alive")
}

func testEventsIndex(t *testing.T, e env[ports.WaitingRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 1)
	has := func() bool { return listed(t, e.impl, eventID) }
	expectEqual(t, has(), true, "an opened room is listed")
	_, err := e.impl.Reconcile(ctx, eventID, 0, longRetention)
	must(t, err, "reconcile")
	expectEqual(t, has(), false, "an empty room is listed after reconcile")
	enter(t, e.impl, eventID, "a")
	expectEqual(t, has(), true, "a room with a waiting user is listed")
	_, err = e.impl.Reconcile(ctx, eventID, 0, longRetention)
	must(t, err, "reconcile")
	expectEqual(t, has(), true, "a room with a waiting user is listed after reconcile")
}

// awaitForgotten waits until the store has forgotten the room: ports.ErrRoomNotOpen.
func awaitForgotten(t *testing.T, w ports.WaitingRoom, eventID string) {
	t.Helper()
	testkit.Eventually(t, expiryBound, "the emptied room forgotten", func() error {
		_, err := w.Stats(context.Background(), eventID)
		switch {
		case err == nil:
			return errors.New("the store still holds the room")
		case !errors.Is(err, ports.ErrRoomNotOpen):
			return fmt.Errorf("stats: %w", err)
		}
		return nil
	})
}

// emptyAgainForgotten empties the room with a pass of shortRetention and checks it is
// forgotten: a pass that found it empty before and whose expiry no use of the room took off
// would keep it longRetention.
func emptyAgainForgotten(t *testing.T, w ports.WaitingRoom, eventID string) {
	t.Helper()
	_, err := w.Reconcile(context.Background(), eventID, 0, shortRetention)
	must(t, err, "reconcile with the short retention")
	awaitForgotten(t, w, eventID)
}

func testEmptyRoomExpires(t *testing.T, e env[ports.WaitingRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 5)
	enter(t, e.impl, eventID, "a")
	enter(t, e.impl, eventID, "b")
	must(t, e.impl.Predict(ctx, eventID, map[string]int{"a": 5}), "predict a's wait")
	claim(t, e.impl, eventID, "a", longTokenTTL)
	must(t, e.impl.Leave(ctx, eventID, "b"), "b leaves")
	expectEqual(t, len(waitErrors(t, e.impl, eventID)), 1, "wait errors before the room empties")
	_, err := e.impl.Reconcile(ctx, eventID, 0, shortRetention)
	must(t, err, "reconcile while a is admitted")
	freed, err := e.impl.Release(ctx, eventID, "a")
	must(t, err, "release")
	expectEqual(t, freed, true, "a's release freed the slot")
	// Found empty only now: the pass before, with a admitted, left the room for good.
	emptyAgainForgotten(t, e.impl, eventID)
	events, err := e.impl.Events(ctx)
	must(t, err, "events")
	expectEqual(t, slices.Contains(events, eventID), false, "the forgotten room is listed")
	_, err = e.impl.Enter(ctx, eventID, "c")
	expectIs(t, err, ports.ErrRoomNotOpen, "enter the forgotten room")

	// Opened again from the database, as the use cases do on ErrRoomNotOpen: afresh.
	must(t, e.impl.Open(ctx, eventID, 2, 4), "open again")
	s := stats(t, e.impl, eventID)
	expectEqual(t, s, ports.RoomStats{Slots: 2, RemainingSlots: 2, RemainingSeats: 4}, "stats of the room opened again")
	place := enter(t, e.impl, eventID, "c")
	expectEqual(t, place.Created && place.Rank == 0, true, "c's entry is a first one, at the head")
	expectEqual(t, len(waitErrors(t, e.impl, eventID)), 0, "wait errors kept")
}

func testEntryKeepsRoom(t *testing.T, e env[ports.WaitingRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 5)
	_, err := e.impl.Reconcile(ctx, eventID, 0, longRetention)
	must(t, err, "reconcile the empty room")
	enter(t, e.impl, eventID, "a")
	must(t, e.impl.Leave(ctx, eventID, "a"), "a leaves")
	emptyAgainForgotten(t, e.impl, eventID)
}

// A slot change lists the event again, as an entry does: its room is in use, and stays until a
// pass, which finds it in the list, finds it empty again.
func testSlotChangeKeepsRoom(t *testing.T, e env[ports.WaitingRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 5)
	_, err := e.impl.Reconcile(ctx, eventID, 0, longRetention)
	must(t, err, "reconcile the empty room")
	_, err = e.impl.SetSlots(ctx, eventID, 3)
	must(t, err, "set slots")
	expectEqual(t, listed(t, e.impl, eventID), true, "the room whose slots changed is listed")
	emptyAgainForgotten(t, e.impl, eventID)
}

// An Open lists the event again: its room is in use, and stays until a pass finds it empty
// again.
func testOpenKeepsRoom(t *testing.T, e env[ports.WaitingRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 5)
	_, err := e.impl.Reconcile(ctx, eventID, 0, longRetention)
	must(t, err, "reconcile the empty room")
	must(t, e.impl.Open(ctx, eventID, 1, 5), "open again")
	expectEqual(t, listed(t, e.impl, eventID), true, "the room opened again is listed")
	emptyAgainForgotten(t, e.impl, eventID)
}

// listed reports whether the store lists eventID among the events in use.
func listed(t *testing.T, w ports.WaitingRoom, eventID string) bool {
	t.Helper()
	events, err := w.Events(context.Background())
	must(t, err, "events")
	return slices.Contains(events, eventID)
}

func testSeatCounter(t *testing.T, e env[ports.WaitingRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 3)
	seats := func() int {
		n, err := e.impl.SeatsLeft(ctx, eventID)
		must(t, err, "seats left")
		return n
	}
	expectEqual(t, seats(), 3, "seats at open")
	left, err := e.impl.TakeSeat(ctx, eventID)
	must(t, err, "take seat")
	expectEqual(t, left, 2, "seats answered by the take")
	expectEqual(t, seats(), 2, "seats after one taken")
	reset, err := e.impl.ResetSeatsLeft(ctx, eventID, 3, 7)
	must(t, err, "reset from a stale value")
	expectEqual(t, reset, false, "reset from a value the counter no longer holds")
	expectEqual(t, seats(), 2, "seats after a refused reset")
	reset, err = e.impl.ResetSeatsLeft(ctx, eventID, 2, 7)
	must(t, err, "reset")
	expectEqual(t, reset, true, "reset from the value the counter holds")
	expectEqual(t, seats(), 7, "seats after repair")
	expectEqual(t, stats(t, e.impl, eventID).RemainingSeats, 7, "stats' seats")
}

func testOpenTwice(t *testing.T, e env[ports.WaitingRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 5)
	enter(t, e.impl, eventID, "a")
	claim(t, e.impl, eventID, "a", longTokenTTL)
	must(t, e.impl.Open(ctx, eventID, 9, 9), "open again")
	s := stats(t, e.impl, eventID)
	expectEqual(t, s.Slots, 1, "slots after a second open")
	expectEqual(t, s.Admitted, 1, "admitted after a second open")
	expectEqual(t, s.RemainingSeats, 5, "seats after a second open")
}

func testRoomNotOpen(t *testing.T, e env[ports.WaitingRoom]) {
	ctx := context.Background()
	eventID := "never-" + randomID()
	_, err := e.impl.Enter(ctx, eventID, "a")
	expectIs(t, err, ports.ErrRoomNotOpen, "enter")
	_, err = e.impl.Claim(ctx, eventID, "a", "t", longTokenTTL)
	expectIs(t, err, ports.ErrRoomNotOpen, "claim")
	_, err = e.impl.Stats(ctx, eventID)
	expectIs(t, err, ports.ErrRoomNotOpen, "stats")
	_, err = e.impl.SeatsLeft(ctx, eventID)
	expectIs(t, err, ports.ErrRoomNotOpen, "seats left")
}
