package memory_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/rushgate/rushgate/ports"
)

// newMarker returns a marker for (scope, key) created at epoch plus age.
func newMarker(scope, key string, age time.Duration) ports.IdempotencyMarker {
	return ports.IdempotencyMarker{
		Key:         ports.IdempotencyKey{Scope: scope, Key: key},
		Fingerprint: "fp-" + scope + "-" + key,
		Response:    ports.StoredResponse{Outcome: "joined", Body: []byte(`{"key":"` + key + `"}`)},
		CreatedAt:   epoch.Add(age),
	}
}

// storedKeys returns which of keys have a committed marker, sorted by key.
func storedKeys(t *testing.T, s store, keys ...ports.IdempotencyKey) []string {
	t.Helper()
	found, err := s.Markers.Find(context.Background(), keys)
	if err != nil {
		t.Fatalf("Find: %v", err)
	}
	var stored []string
	for k := range found {
		stored = append(stored, k.Scope+"/"+k.Key)
	}
	slices.Sort(stored)
	return stored
}

// markerKey is key k in scope.
func markerKey(scope, k string) ports.IdempotencyKey {
	return ports.IdempotencyKey{Scope: scope, Key: k}
}

func TestMarkers_FindReturnsCopiesOfTheSavedMarkers(t *testing.T) {
	t.Parallel()
	s := newStore()
	ctx := context.Background()
	alice, bob := newMarker("alice", "k1", 0), newMarker("bob", "k1", time.Second)
	if err := s.Markers.Save(ctx, []ports.IdempotencyMarker{alice, bob}); err != nil {
		t.Fatalf("Save: %v", err)
	}
	alice.Response.Body[0] = 'X'

	found, err := s.Markers.Find(ctx, []ports.IdempotencyKey{markerKey("alice", "k1"), markerKey("bob", "k1"), markerKey("alice", "k2")})
	if err != nil {
		t.Fatalf("Find: %v", err)
	}
	want := map[ports.IdempotencyKey]ports.IdempotencyMarker{alice.Key: newMarker("alice", "k1", 0), bob.Key: bob}
	if !maps.EqualFunc(found, want, sameMarker) {
		t.Fatalf("Find = %+v, want %+v", found, want)
	}
	found[alice.Key].Response.Body[0] = 'X'
	if again, _ := s.Markers.Find(ctx, []ports.IdempotencyKey{alice.Key}); !sameMarker(again[alice.Key], want[alice.Key]) {
		t.Errorf("mutating a found body changed the store: %q", again[alice.Key].Response.Body)
	}
}

func sameMarker(a, b ports.IdempotencyMarker) bool {
	return a.Key == b.Key && a.Fingerprint == b.Fingerprint && a.Response.Outcome == b.Response.Outcome &&
		string(a.Response.Body) == string(b.Response.Body) && a.CreatedAt.Equal(b.CreatedAt)
}

func TestMarkers_SaveInsertsAllOrNone(t *testing.T) {
	cases := map[string]struct {
		save     []ports.IdempotencyMarker
		wantErr  error
		wantKeys []string
	}{
		"new keys": {
			save:     []ports.IdempotencyMarker{newMarker("u1", "k2", 0), newMarker("u2", "k1", 0)},
			wantKeys: []string{"u1/k1", "u1/k2", "u2/k1"},
		},
		"one key already saved": {
			save:     []ports.IdempotencyMarker{newMarker("u1", "k2", 0), newMarker("u1", "k1", 0)},
			wantErr:  ports.ErrMarkerExists,
			wantKeys: []string{"u1/k1"},
		},
		"the same key twice": {
			save:     []ports.IdempotencyMarker{newMarker("u1", "k2", 0), newMarker("u1", "k2", 0)},
			wantErr:  ports.ErrMarkerExists,
			wantKeys: []string{"u1/k1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStore()
			ctx := context.Background()
			if err := s.Markers.Save(ctx, []ports.IdempotencyMarker{newMarker("u1", "k1", 0)}); err != nil {
				t.Fatalf("Save: %v", err)
			}
			if err := s.Markers.Save(ctx, tc.save); !errors.Is(err, tc.wantErr) {
				t.Fatalf("Save = %v, want %v", err, tc.wantErr)
			}
			if got := storedKeys(t, s, markerKey("u1", "k1"), markerKey("u1", "k2"), markerKey("u2", "k1")); !slices.Equal(got, tc.wantKeys) {
				t.Errorf("stored = %v, want %v", got, tc.wantKeys)
			}
		})
	}
}

// storedIn reports whether k has a marker as ctx's transaction sees it.
func storedIn(ctx context.Context, t *testing.T, s store, k ports.IdempotencyKey) bool {
	t.Helper()
	found, err := s.Markers.Find(ctx, []ports.IdempotencyKey{k})
	if err != nil {
		t.Errorf("Find: %v", err)
	}
	_, ok := found[k]
	return ok
}

// A Save of a key a concurrent transaction has saved but not committed waits for it, then
// fails if it committed and succeeds if it rolled back.
func TestMarkers_ConcurrentSaveWaitsForTheFirst(t *testing.T) {
	cases := map[string]struct {
		firstEnds       error // nil commits
		wantSecond      error
		wantFingerprint string
	}{
		"first commits":    {nil, ports.ErrMarkerExists, "first"},
		"first rolls back": {errRollback, nil, "second"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStore()
			first, second := newMarker("u1", "k1", 0), newMarker("u1", "k1", 0)
			first.Fingerprint, second.Fingerprint = "first", "second"

			end := openTx(t, s.db, func(ctx context.Context) error {
				return s.Markers.Save(ctx, []ports.IdempotencyMarker{first})
			})
			result := make(chan error, 1)
			go func() {
				result <- s.db.InTx(context.Background(), func(ctx context.Context) error {
					return s.Markers.Save(ctx, []ports.IdempotencyMarker{second})
				})
			}()
			waitUntilBlocked(t, s.db, 1)
			if err := end(tc.firstEnds); !errors.Is(err, tc.firstEnds) {
				t.Fatalf("ending the first transaction: %v", err)
			}
			if err := <-result; !errors.Is(err, tc.wantSecond) {
				t.Fatalf("second Save = %v, want %v", err, tc.wantSecond)
			}
			found, err := s.Markers.Find(context.Background(), []ports.IdempotencyKey{first.Key})
			if err != nil {
				t.Fatalf("Find: %v", err)
			}
			if got := found[first.Key].Fingerprint; got != tc.wantFingerprint {
				t.Errorf("stored fingerprint = %q, want %q", got, tc.wantFingerprint)
			}
		})
	}
}
