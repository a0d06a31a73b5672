package porttest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/rushgate/rushgate/ports"
)

const (
	longLease = time.Minute
	longTTL   = time.Minute
	// shortIdempotencyPeriod is a lease or TTL that runs out within the case, yet outlasts the
	// calls a case makes before it must have run out (a Begin, then another Begin or the
	// Complete) on a store shared with other work: at 100 ms a busy runner's pause between two
	// calls expired it first. waitBeyondShortIdempotencyPeriod surely outlasts it.
	shortIdempotencyPeriod           = 2 * time.Second
	waitBeyondShortIdempotencyPeriod = 3 * time.Second
)

// TestIdempotencyStore checks ports.IdempotencyStore: of concurrent Begins on an absent key
// exactly one starts; others see the key in progress with the original fingerprint; scopes
// isolate keys, whatever separators they contain; Complete stores an outcome and a binary body
// that later Begins replay, under a fresh TTL; Delete frees the key; an expired lease is taken
// over by the same fingerprint only, and the old token can then neither complete nor delete;
// records vanish after their TTL. With Capabilities.SharedInstances it also checks that a
// record begun through one instance is seen through another.
func TestIdempotencyStore(t *testing.T, newStore func(t *testing.T) ports.IdempotencyStore, caps Capabilities) {
	run(t, newStore, caps, []testCase[ports.IdempotencyStore]{
		{"Begin_AbsentKeyStartsWithTokenAndFingerprint", testBeginAbsentKey},
		{"Begin_InProgressReportsOriginalFingerprint", testBeginInProgress},
		{"Begin_ConcurrentCallersExactlyOneStarts", testBeginConcurrent},
		{"Begin_ScopesIsolateKeys", testBeginScopesIsolate},
		{"Begin_AnotherInstanceSeesTheRecord", testBeginAnotherInstance},
		{"Complete_ReplaysOutcomeAndBody", testCompleteReplays},
		{"Complete_RenewsTTL", testCompleteRenewsTTL},
		{"Delete_FreesKey", testDeleteFreesKey},
		{"Begin_ExpiredLeaseIsTakenOverAndOldTokenIsFenced", testLeaseTakeover},
		{"Complete_AfterDeleteIsNoOp", testCompleteAfterDelete},
		{"TTL_ExpiryRemovesInProgressRecord", testInProgressTTLExpiry},
		{"TTL_ExpiryRemovesCompletedRecord", testCompletedTTLExpiry},
	})
}

// newIdempotencyKey returns a random key in a random scope.
func newIdempotencyKey() ports.IdempotencyKey {
	return ports.IdempotencyKey{Scope: "user-" + randomID(), Key: randomID()}
}

// beginExpecting calls Begin and requires it to succeed with the wanted state.
func beginExpecting(t *testing.T, store ports.IdempotencyStore, key ports.IdempotencyKey, fingerprint string,
	lease, ttl time.Duration, want ports.BeginState) ports.BeginResult {
	t.Helper()
	result, err := store.Begin(context.Background(), key, fingerprint, lease, ttl)
	must(t, err, "begin")
	if result.State != want {
		t.Fatalf("Begin state %v, want %v", result.State, want)
	}
	return result
}

// expectSameResponse compares stored responses; an empty body and no body are the same.
func expectSameResponse(t *testing.T, got, want ports.StoredResponse, what string) {
	t.Helper()
	if got.Outcome != want.Outcome || !bytes.Equal(got.Body, want.Body) {
		t.Errorf("%s: response {%q %q}, want {%q %q}", what, got.Outcome, got.Body, want.Outcome, want.Body)
	}
}

func testBeginAbsentKey(t *testing.T, e env[ports.IdempotencyStore]) {
	started := beginExpecting(t, e.impl, newIdempotencyKey(), "crew.join 1 {}", longLease, longTTL, ports.BeginStarted)

	if started.Token == "" {
		t.Error("no token for the owner")
	}
	expectEqual(t, started.Fingerprint, "crew.join 1 {}", "fingerprint")
}

func testBeginInProgress(t *testing.T, e env[ports.IdempotencyStore]) {
	key := newIdempotencyKey()
	beginExpecting(t, e.impl, key, "original", longLease, longTTL, ports.BeginStarted)

	again := beginExpecting(t, e.impl, key, "different payload", longLease, longTTL, ports.BeginInProgress)

	expectEqual(t, again.Fingerprint, "original", "fingerprint")
	expectEqual(t, again.Token, "", "token of a non-owner")
}

func testBeginConcurrent(t *testing.T, e env[ports.IdempotencyStore]) {
	const callers = 100
	key := newIdempotencyKey()
	results := make([]ports.BeginResult, callers)

	errs := startTogether(callers, func(i int) error {
		var err error
		results[i], err = e.impl.Begin(context.Background(), key, "fp", longLease, longTTL)
		return err
	})

	started, inProgress := 0, 0
	for i, result := range results {
		must(t, errs[i], "begin")
		switch result.State {
		case ports.BeginStarted:
			started++
		case ports.BeginInProgress:
			inProgress++
		}
	}
	expectEqual(t, started, 1, "started")
	expectEqual(t, inProgress, callers-1, "in progress")
}

func testBeginScopesIsolate(t *testing.T, e env[ports.IdempotencyStore]) {
	key := randomID()
	beginExpecting(t, e.impl, ports.IdempotencyKey{Scope: "alice-" + key, Key: key}, "a", longLease, longTTL, ports.BeginStarted)
	bob := beginExpecting(t, e.impl, ports.IdempotencyKey{Scope: "bob-" + key, Key: key}, "b", longLease, longTTL, ports.BeginStarted)
	expectEqual(t, bob.Fingerprint, "b", "fingerprint in another scope")

	// Separators inside user input must not make two pairs name one record.
	beginExpecting(t, e.impl, ports.IdempotencyKey{Scope: key + ":x", Key: "y"}, "c", longLease, longTTL, ports.BeginStarted)
	beginExpecting(t, e.impl, ports.IdempotencyKey{Scope: key, Key: "x:y"}, "d", longLease, longTTL, ports.BeginStarted)
}

func testBeginAnotherInstance(t *testing.T, e env[ports.IdempotencyStore]) {
	if !e.caps.SharedInstances {
		t.Skip("the backend's instances do not share records")
	}
	other := e.open(t)
	key := newIdempotencyKey()
	started := beginExpecting(t, e.impl, key, "fp", longLease, longTTL, ports.BeginStarted)

	beginExpecting(t, other, key, "fp", longLease, longTTL, ports.BeginInProgress)

	response := ports.StoredResponse{Outcome: "joined", Body: []byte(`{"crewId":"c1"}`)}
	must(t, e.impl.Complete(context.Background(), key, started.Token, response, longTTL), "complete")
	replay := beginExpecting(t, other, key, "fp", longLease, longTTL, ports.BeginCompleted)
	expectSameResponse(t, replay.Response, response, "replay on the other instance")
}

func testCompleteReplays(t *testing.T, e env[ports.IdempotencyStore]) {
	key := newIdempotencyKey()
	started := beginExpecting(t, e.impl, key, "fp", longLease, longTTL, ports.BeginStarted)
	response := ports.StoredResponse{Outcome: "joined", Body: []byte(`{"crewId":"c1"}` + "\x00\xff binary-safe")}

	must(t, e.impl.Complete(context.Background(), key, started.Token, response, longTTL), "complete")

	replay := beginExpecting(t, e.impl, key, "fp", longLease, longTTL, ports.BeginCompleted)
	expectEqual(t, replay.Fingerprint, "fp", "fingerprint")
	expectSameResponse(t, replay.Response, response, "replay")
}

func testCompleteRenewsTTL(t *testing.T, e env[ports.IdempotencyStore]) {
	key := newIdempotencyKey()
	started := beginExpecting(t, e.impl, key, "fp", shortIdempotencyPeriod, shortIdempotencyPeriod, ports.BeginStarted)
	must(t, e.impl.Complete(context.Background(), key, started.Token, ports.StoredResponse{Outcome: "ok"}, longTTL), "complete")

	time.Sleep(waitBeyondShortIdempotencyPeriod)

	replay := beginExpecting(t, e.impl, key, "fp", longLease, longTTL, ports.BeginCompleted)
	expectSameResponse(t, replay.Response, ports.StoredResponse{Outcome: "ok"}, "replay")
}

func testDeleteFreesKey(t *testing.T, e env[ports.IdempotencyStore]) {
	key := newIdempotencyKey()
	first := beginExpecting(t, e.impl, key, "fp", longLease, longTTL, ports.BeginStarted)
	must(t, e.impl.Delete(context.Background(), key, first.Token), "delete")

	retry := beginExpecting(t, e.impl, key, "fp", longLease, longTTL, ports.BeginStarted)

	if retry.Token == first.Token {
		t.Error("the retry got the deleted record's token")
	}
}

func testLeaseTakeover(t *testing.T, e env[ports.IdempotencyStore]) {
	ctx := context.Background()
	key := newIdempotencyKey()
	crashed := beginExpecting(t, e.impl, key, "fp", shortIdempotencyPeriod, longTTL, ports.BeginStarted)
	beginExpecting(t, e.impl, key, "fp", longLease, longTTL, ports.BeginInProgress)

	time.Sleep(waitBeyondShortIdempotencyPeriod)

	// Another payload never takes the key over: it is told about the original request.
	other := beginExpecting(t, e.impl, key, "other-fp", longLease, longTTL, ports.BeginInProgress)
	expectEqual(t, other.Fingerprint, "fp", "fingerprint told to another payload")

	takeover := beginExpecting(t, e.impl, key, "fp", longLease, longTTL, ports.BeginStarted)
	if takeover.Token == crashed.Token {
		t.Error("the takeover got the crashed owner's token")
	}
	expectEqual(t, takeover.Fingerprint, "fp", "fingerprint after takeover")

	must(t, e.impl.Complete(ctx, key, crashed.Token, ports.StoredResponse{Outcome: "failed"}, longTTL), "stale complete")
	must(t, e.impl.Delete(ctx, key, crashed.Token), "stale delete")
	beginExpecting(t, e.impl, key, "fp", longLease, longTTL, ports.BeginInProgress) // the stale token changed nothing

	must(t, e.impl.Complete(ctx, key, takeover.Token, ports.StoredResponse{Outcome: "joined"}, longTTL), "complete")
	replay := beginExpecting(t, e.impl, key, "fp", longLease, longTTL, ports.BeginCompleted)
	expectSameResponse(t, replay.Response, ports.StoredResponse{Outcome: "joined"}, "replay of the takeover's answer")
}

func testCompleteAfterDelete(t *testing.T, e env[ports.IdempotencyStore]) {
	ctx := context.Background()
	key := newIdempotencyKey()
	started := beginExpecting(t, e.impl, key, "fp", longLease, longTTL, ports.BeginStarted)
	must(t, e.impl.Delete(ctx, key, started.Token), "delete")

	must(t, e.impl.Complete(ctx, key, started.Token, ports.StoredResponse{Outcome: "joined"}, longTTL), "complete")

	beginExpecting(t, e.impl, key, "fp", longLease, longTTL, ports.BeginStarted)
}

func testInProgressTTLExpiry(t *testing.T, e env[ports.IdempotencyStore]) {
	key := newIdempotencyKey()
	beginExpecting(t, e.impl, key, "first", longLease, shortIdempotencyPeriod, ports.BeginStarted)

	time.Sleep(waitBeyondShortIdempotencyPeriod)

	fresh := beginExpecting(t, e.impl, key, "second", longLease, longTTL, ports.BeginStarted)
	expectEqual(t, fresh.Fingerprint, "second", "fingerprint once the record is gone, lease or not")
}

func testCompletedTTLExpiry(t *testing.T, e env[ports.IdempotencyStore]) {
	key := newIdempotencyKey()
	started := beginExpecting(t, e.impl, key, "fp", longLease, longTTL, ports.BeginStarted)
	must(t, e.impl.Complete(context.Background(), key, started.Token,
		ports.StoredResponse{Outcome: "joined"}, shortIdempotencyPeriod), "complete")

	time.Sleep(waitBeyondShortIdempotencyPeriod)

	beginExpecting(t, e.impl, key, "fp", longLease, longTTL, ports.BeginStarted)
}
