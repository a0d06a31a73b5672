package porttest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rushgate/rushgate/ports"
)

const (
	// earlyEstimate is far longer than any case runs: a user admitted right after it was given
	// is admitted early, by almost all of it.
	earlyEstimate = 3600
	// latePause is how long a case lets pass after an estimate of 0 before the admission, so
	// the user is admitted late by at least that (less the millisecond a store may round off).
	latePause = 20 * time.Millisecond
)

// TestWaitPredictor checks ports.WaitPredictor on both admission modes: the first estimate
// given to a waiting user stays; a pull claim and a push promotion each turn it into a signed
// wait error (actual wait − estimate), early admissions negative and late ones positive; each
// error reaches one Reconcile pass only, while WaitErrors keeps answering it; a user who
// leaves, is dropped, disconnects or is never admitted leaves no error, nor does one who was
// given an estimate while not waiting; two events' estimates do not mix. On a backend whose
// clock the suite controls (Capabilities.NewPushRoomOnClock) the errors are exact.
func TestWaitPredictor(t *testing.T, newRoom func(t *testing.T) PushRoom, caps Capabilities) {
	run(t, newRoom, caps, []testCase[PushRoom]{
		{"Predict_FirstEstimateStays", testPredictFirstStays},
		{"Claim_KeepsTheSignedError", testPredictClaim},
		{"Promote_KeepsTheSignedError", testPredictPromote},
		{"Reconcile_AnswersEachErrorOnce", testPredictReconcileOnce},
		{"NoError_WithoutAdmission", testPredictNoAdmission},
		{"Predict_SkipsUsersNotWaiting", testPredictNotWaiting},
		{"Events_DoNotMix", testPredictEvents},
		{"ControlledClock_ExactErrors", testPredictExact},
	})
}

// span is the store-clock time between two instants of the test's clock, which a store's own
// clock may have rounded down to the millisecond at either end.
type span struct{ from, to time.Time }

func startSpan() span { return span{from: time.Now()} }

func (s span) end() span { s.to = time.Now(); return s }

// expectWaitError checks that err is the wait error of a user given estimate within s's start
// and admitted within its end: actual wait − estimate, where the wait lasted at least least
// and at most the span.
func expectWaitError(t *testing.T, err time.Duration, estimate int, least time.Duration, s span, what string) {
	t.Helper()
	predicted := time.Duration(estimate) * time.Second
	low, high := least-predicted-time.Millisecond, s.to.Sub(s.from)-predicted+time.Millisecond
	if err < low || err > high {
		t.Errorf("%s: wait error %v, want within [%v, %v]", what, err, low, high)
	}
}

func predict(t *testing.T, w PushRoom, eventID string, seconds map[string]int) {
	t.Helper()
	must(t, w.Predict(context.Background(), eventID, seconds), fmt.Sprintf("predict %v", seconds))
}

func waitErrors(t *testing.T, w ports.WaitPredictor, eventID string) []time.Duration {
	t.Helper()
	waits, err := w.WaitErrors(context.Background(), eventID)
	must(t, err, "wait errors")
	return waits
}

func reconciledWaits(t *testing.T, w PushRoom, eventID string) []time.Duration {
	t.Helper()
	done, err := w.Reconcile(context.Background(), eventID, 0, longRetention)
	must(t, err, "reconcile")
	return done.WaitErrors
}

// bySign splits wait errors into the early (negative) and the late (the rest).
func bySign(waits []time.Duration) (early, late []time.Duration) {
	for _, w := range waits {
		if w < 0 {
			early = append(early, w)
		} else {
			late = append(late, w)
		}
	}
	return early, late
}

func testPredictFirstStays(t *testing.T, e env[PushRoom]) {
	eventID := openRoom(t, e.impl, 1, 1)
	enter(t, e.impl, eventID, "a")
	s := startSpan()
	predict(t, e.impl, eventID, map[string]int{"a": earlyEstimate})
	predict(t, e.impl, eventID, map[string]int{"a": 0})
	expectEqual(t, claim(t, e.impl, eventID, "a", longTokenTTL).Claimed, true, "a claims")
	s = s.end()
	waits := waitErrors(t, e.impl, eventID)
	if len(waits) != 1 {
		t.Fatalf("wait errors %v, want one", waits)
	}
	expectWaitError(t, waits[0], earlyEstimate, 0, s, "the first estimate's error")
}

// admitEarlyAndLate gives a the early estimate and b an estimate of 0, lets latePause pass,
// and admits both with admit: a is admitted early and b late.
func admitEarlyAndLate(t *testing.T, e env[PushRoom], admit func(eventID string)) {
	eventID := openRoom(t, e.impl, 2, 2)
	enter(t, e.impl, eventID, "a")
	enter(t, e.impl, eventID, "b")
	s := startSpan()
	predict(t, e.impl, eventID, map[string]int{"a": earlyEstimate, "b": 0})
	time.Sleep(latePause)
	admit(eventID)
	s = s.end()
	early, late := bySign(waitErrors(t, e.impl, eventID))
	if len(early) != 1 || len(late) != 1 {
		t.Fatalf("early %v and late %v, want one each", early, late)
	}
	expectWaitError(t, early[0], earlyEstimate, latePause, s, "the early admission")
	expectWaitError(t, late[0], 0, latePause, s, "the late admission")
	if late[0] <= 0 {
		t.Errorf("late admission: wait error %v, want above 0", late[0])
	}
}

func testPredictClaim(t *testing.T, e env[PushRoom]) {
	admitEarlyAndLate(t, e, func(eventID string) {
		for _, u := range []string{"a", "b"} {
			expectEqual(t, claim(t, e.impl, eventID, u, longTokenTTL).Claimed, true, u+" claims")
		}
	})
}

func testPredictPromote(t *testing.T, e env[PushRoom]) {
	admitEarlyAndLate(t, e, func(eventID string) {
		promoted, _, err := e.impl.Promote(context.Background(), eventID, longTokenTTL, ports.EntryRead{})
		must(t, err, "promote")
		expectEqual(t, promoted, 2, "promoted")
	})
}

func testPredictReconcileOnce(t *testing.T, e env[PushRoom]) {
	eventID := openRoom(t, e.impl, 2, 2)
	enter(t, e.impl, eventID, "a")
	enter(t, e.impl, eventID, "b")
	predict(t, e.impl, eventID, map[string]int{"a": earlyEstimate, "b": earlyEstimate})
	claim(t, e.impl, eventID, "a", longTokenTTL)
	first := reconciledWaits(t, e.impl, eventID)
	expectEqual(t, len(first), 1, "errors answered by the first pass")
	// Another instance's pass (the same store on a backend without shared instances) answers
	// nothing that a pass answered already.
	other := e.open(t)
	expectEqual(t, len(reconciledWaits(t, other, eventID)), 0, "errors answered again by a second pass")

	claim(t, e.impl, eventID, "b", longTokenTTL)
	second := reconciledWaits(t, other, eventID)
	expectEqual(t, len(second), 1, "errors answered after b's admission")
	expectEqual(t, len(reconciledWaits(t, e.impl, eventID)), 0, "b's error answered again")
	expectEqual(t, len(waitErrors(t, e.impl, eventID)), 2, "errors kept after the passes")
}

func testPredictNoAdmission(t *testing.T, e env[PushRoom]) {
	const idle = 500 * time.Millisecond
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 1)
	enter(t, e.impl, eventID, "holder")
	claim(t, e.impl, eventID, "holder", longTokenTTL) // the one slot: nobody else is admitted
	for _, u := range []string{"leaver", "idle", "stayer"} {
		enter(t, e.impl, eventID, u)
	}
	connect(t, e.impl, eventID, "pushed", "broker-1|1|")
	predict(t, e.impl, eventID, map[string]int{"leaver": 0, "idle": 0, "stayer": 0, "pushed": 0})

	must(t, e.impl.Leave(ctx, eventID, "leaver"), "leaver leaves")
	departed, err := e.impl.Disconnect(ctx, eventID, "pushed", "broker-1|")
	must(t, err, "disconnect")
	expectEqual(t, departed, ports.Removed, "the push user leaves")
	time.Sleep(2 * idle)
	position(t, e.impl, eventID, "stayer")
	done, err := e.impl.Reconcile(ctx, eventID, idle, longRetention)
	must(t, err, "reconcile")
	expectEqual(t, done.Dropped, 1, "dropped")
	expectEqual(t, len(done.WaitErrors), 0, "errors of the pass")

	// Everyone who left enters again and is admitted, and so is the one who stayed: only the
	// stayer's estimate is still recorded.
	_, err = e.impl.Release(ctx, eventID, "holder")
	must(t, err, "release holder")
	must(t, e.impl.Leave(ctx, eventID, "stayer"), "stayer leaves")
	for _, u := range []string{"leaver", "idle", "pushed"} {
		enter(t, e.impl, eventID, u)
		expectEqual(t, claim(t, e.impl, eventID, u, longTokenTTL).Claimed, true, u+" claims")
		_, err = e.impl.Release(ctx, eventID, u)
		must(t, err, "release "+u)
	}
	expectEqual(t, len(waitErrors(t, e.impl, eventID)), 0, "errors of users who left before their admission")
	expectEqual(t, len(reconciledWaits(t, e.impl, eventID)), 0, "errors of the next pass")
}

func testPredictNotWaiting(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 1)
	enter(t, e.impl, eventID, "admitted")
	claim(t, e.impl, eventID, "admitted", longTokenTTL)
	// An estimate that arrives after its user's admission, or for a user not in the line, is
	// no prediction of a wait.
	predict(t, e.impl, eventID, map[string]int{"admitted": 0, "stranger": 0})
	_, err := e.impl.Release(ctx, eventID, "admitted")
	must(t, err, "release")
	for _, u := range []string{"admitted", "stranger"} {
		enter(t, e.impl, eventID, u)
		expectEqual(t, claim(t, e.impl, eventID, u, longTokenTTL).Claimed, true, u+" claims")
		_, err = e.impl.Release(ctx, eventID, u)
		must(t, err, "release "+u)
	}
	expectEqual(t, len(waitErrors(t, e.impl, eventID)), 0, "errors of estimates given to users not waiting")
}

func testPredictEvents(t *testing.T, e env[PushRoom]) {
	early, late := openRoom(t, e.impl, 1, 1), openRoom(t, e.impl, 1, 1)
	enter(t, e.impl, early, "u")
	enter(t, e.impl, late, "u")
	s := startSpan()
	predict(t, e.impl, early, map[string]int{"u": earlyEstimate})
	predict(t, e.impl, late, map[string]int{"u": 0})
	time.Sleep(latePause)
	claim(t, e.impl, late, "u", longTokenTTL)
	claim(t, e.impl, early, "u", longTokenTTL)
	s = s.end()
	for eventID, estimate := range map[string]int{early: earlyEstimate, late: 0} {
		waits := waitErrors(t, e.impl, eventID)
		if len(waits) != 1 {
			t.Fatalf("wait errors %v, want one", waits)
		}
		expectWaitError(t, waits[0], estimate, latePause, s, fmt.Sprintf("the error of the estimate %d", estimate))
		passed := reconciledWaits(t, e.impl, eventID)
		if len(passed) != 1 || passed[0] != waits[0] {
			t.Errorf("errors of the pass %v, want %v", passed, waits)
		}
	}
}

// testClock is a ports.Clock that moves only when the case advances it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func testPredictExact(t *testing.T, e env[PushRoom]) {
	if e.caps.NewPushRoomOnClock == nil {
		t.Skip("the store's clock is its own")
	}
	clock := &testClock{now: now()}
	w := e.caps.NewPushRoomOnClock(t, clock)
	eventID := openRoom(t, w, 3, 3)
	for _, u := range []string{"a", "b", "c"} {
		enter(t, w, eventID, u)
	}
	predict(t, w, eventID, map[string]int{"a": 30, "b": 5})
	clock.advance(10 * time.Second)
	predict(t, w, eventID, map[string]int{"a": 1, "c": 2})
	clock.advance(10 * time.Second)
	claim(t, w, eventID, "a", longTokenTTL)
	claim(t, w, eventID, "b", longTokenTTL)
	promoted, _, err := w.Promote(context.Background(), eventID, longTokenTTL, ports.EntryRead{})
	must(t, err, "promote c")
	expectEqual(t, promoted, 1, "promoted")
	// Newest first: c (given 2 s at 10 s, admitted at 20 s), b (5 s at 0, admitted at 20 s), a
	// (its first 30 s at 0, admitted at 20 s).
	want := fmt.Sprint([]time.Duration{8 * time.Second, 15 * time.Second, -10 * time.Second})
	expectEqual(t, fmt.Sprint(waitErrors(t, w, eventID)), want, "wait errors")
	expectEqual(t, fmt.Sprint(reconciledWaits(t, w, eventID)), fmt.Sprint([]time.Duration{-10 * time.Second, 15 * time.Second, 8 * time.Second}),
		"errors of the pass, in order of admission")
}
