package memory_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

const (
	lease = 30 * time.Second
	ttl   = time.Hour
)

func begin(t *testing.T, s *memory.IdempotencyStore, key ports.IdempotencyKey, fingerprint string) ports.BeginResult {
	t.Helper()
	res, err := s.Begin(context.Background(), key, fingerprint, lease, ttl)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	return res
}

func TestIdempotency_OneWinnerAmongConcurrentBegins(t *testing.T) {
	t.Parallel()
	s := memory.NewIdempotencyStore(newFakeClock())
	key := ports.IdempotencyKey{Scope: "u1", Key: "k1"}

	results := make([]ports.BeginResult, 100)
	testkit.StartTogether(len(results), func(i int) { results[i] = begin(t, s, key, "fp") })
	counts := map[ports.BeginState]int{}
	for _, res := range results {
		counts[res.State]++
		if res.Fingerprint != "fp" {
			t.Errorf("fingerprint = %q, want fp", res.Fingerprint)
		}
	}
	if counts[ports.BeginStarted] != 1 || counts[ports.BeginInProgress] != 99 {
		t.Errorf("states = %v, want 1 started and 99 in progress", counts)
	}
}

func TestIdempotency_KeysAreScopedPerUser(t *testing.T) {
	t.Parallel()
	s := memory.NewIdempotencyStore(newFakeClock())
	a := begin(t, s, ports.IdempotencyKey{Scope: "alice", Key: "k"}, "fp-a")
	b := begin(t, s, ports.IdempotencyKey{Scope: "bob", Key: "k"}, "fp-b")
	if a.State != ports.BeginStarted || b.State != ports.BeginStarted {
		t.Errorf("states = %v, %v, want both started", a.State, b.State)
	}
}

func TestIdempotency_CompletedResponseIsReplayedAsACopy(t *testing.T) {
	t.Parallel()
	s := memory.NewIdempotencyStore(newFakeClock())
	ctx := context.Background()
	key := ports.IdempotencyKey{Scope: "u1", Key: "k1"}
	started := begin(t, s, key, "fp")

	body := []byte(`{"ok":true}`)
	if err := s.Complete(ctx, key, started.Token, ports.StoredResponse{Outcome: "created", Body: body}, ttl); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	body[0] = 'X'

	replay := begin(t, s, key, "fp")
	if replay.State != ports.BeginCompleted || replay.Response.Outcome != "created" || string(replay.Response.Body) != `{"ok":true}` {
		t.Fatalf("replay = %+v, want the stored created response", replay)
	}
	replay.Response.Body[0] = 'X'
	if again := begin(t, s, key, "fp"); string(again.Response.Body) != `{"ok":true}` {
		t.Errorf("mutating a replayed body changed the store: %q", again.Response.Body)
	}
}

func TestIdempotency_ExpiredLeaseIsTakenOverAndTheStaleTokenIsFenced(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	s := memory.NewIdempotencyStore(clock)
	ctx := context.Background()
	key := ports.IdempotencyKey{Scope: "u1", Key: "k1"}

	stale := begin(t, s, key, "fp")
	clock.Advance(lease - time.Microsecond)
	if res := begin(t, s, key, "fp"); res.State != ports.BeginInProgress {
		t.Fatalf("within the lease: state = %v, want in progress", res.State)
	}
	clock.Advance(time.Microsecond)
	current := begin(t, s, key, "fp")
	if current.State != ports.BeginStarted || current.Token == stale.Token {
		t.Fatalf("after the lease: %+v, want started with a new token", current)
	}

	// The stale owner can neither complete nor delete the record.
	if err := s.Complete(ctx, key, stale.Token, ports.StoredResponse{Outcome: "failed"}, ttl); err != nil {
		t.Fatalf("stale Complete: %v", err)
	}
	if err := s.Delete(ctx, key, stale.Token); err != nil {
		t.Fatalf("stale Delete: %v", err)
	}
	if res := begin(t, s, key, "fp"); res.State != ports.BeginInProgress {
		t.Fatalf("after stale writes: state = %v, want in progress", res.State)
	}

	if err := s.Complete(ctx, key, current.Token, ports.StoredResponse{Outcome: "created"}, ttl); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if res := begin(t, s, key, "fp"); res.State != ports.BeginCompleted || res.Response.Outcome != "created" {
		t.Fatalf("after Complete: %+v, want the owner's created response", res)
	}
}

func TestIdempotency_DeleteFreesTheKey(t *testing.T) {
	t.Parallel()
	s := memory.NewIdempotencyStore(newFakeClock())
	key := ports.IdempotencyKey{Scope: "u1", Key: "k1"}
	started := begin(t, s, key, "fp")
	if err := s.Delete(context.Background(), key, started.Token); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if res := begin(t, s, key, "fp2"); res.State != ports.BeginStarted || res.Fingerprint != "fp2" {
		t.Fatalf("after Delete: %+v, want started with the new fingerprint", res)
	}
}

func TestIdempotency_RecordsExpireAfterTTLAndCompleteResetsIt(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	s := memory.NewIdempotencyStore(clock)
	key := ports.IdempotencyKey{Scope: "u1", Key: "k1"}

	started := begin(t, s, key, "fp")
	clock.Advance(ttl / 2)
	if err := s.Complete(context.Background(), key, started.Token, ports.StoredResponse{Outcome: "created"}, ttl); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	// Past the first ttl but within the one Complete started.
	clock.Advance(ttl - time.Minute)
	if res := begin(t, s, key, "fp"); res.State != ports.BeginCompleted {
		t.Fatalf("within the fresh ttl: state = %v, want completed", res.State)
	}
	clock.Advance(time.Minute)
	if res := begin(t, s, key, "fp2"); res.State != ports.BeginStarted || res.Fingerprint != "fp2" {
		t.Fatalf("after the ttl: %+v, want a new record", res)
	}
}

func TestIdempotency_ExpiredRecordsArePurged(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	s := memory.NewIdempotencyStore(clock)
	const written = 1000
	for i := range written {
		key := ports.IdempotencyKey{Scope: "u1", Key: strconv.Itoa(i)}
		if res := begin(t, s, key, "fp"); res.State != ports.BeginStarted {
			t.Fatalf("record %d: state = %v, want started", i, res.State)
		}
		clock.Advance(ttl)
	}
	if n := memory.StoredIdempotencyRecords(s); n >= written/10 {
		t.Errorf("%d of %d expired records are still stored", n, written)
	}
}
