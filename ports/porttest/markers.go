package porttest

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rushgate/rushgate/ports"
)

// pruneEra is when the Prune case's markers were created: long before any other case's, so
// that pruning before a time in that era touches its own markers only. A storage shared with
// these suites must hold no markers of its own from before 2000.
var pruneEra = time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC)

// TestIdempotencyMarkers checks ports.IdempotencyMarkerRepository: Save then Find round-trips
// every field, binary bodies included, and Find leaves out keys without a marker; scope and key
// are matched exactly, case and trailing spaces included; Find sees its own transaction's uncommitted Save, others
// do not, and a rollback discards it; Save is all or none, a stored key failing the whole batch
// with ports.ErrMarkerExists; of concurrent transactions saving one key exactly one wins and the
// others get ports.ErrMarkerExists; Prune deletes at most limit markers, oldest first, only
// those created before the given time, and says how many.
func TestIdempotencyMarkers(t *testing.T, newStores func(t *testing.T) ports.Stores, caps Capabilities) {
	run(t, newStores, caps, []testCase[ports.Stores]{
		{"SaveThenFindRoundTrips", testMarkerSaveThenFind},
		{"KeysMatchExactly", testMarkerKeysMatchExactly},
		{"FindSeesOwnTransactionOnly", testMarkerFindSeesOwnTransaction},
		{"RollbackDiscards", testMarkerRollbackDiscards},
		{"SaveWithAStoredKeySavesNone", testMarkerSaveWithStoredKeySavesNone},
		{"ConcurrentSavesOfOneKeyOneWins", testMarkerConcurrentSaves},
		{"PruneIsBoundedAndOldestFirst", testMarkerPrune},
	})
}

// newMarker returns a marker for a random key created at the given time.
func newMarker(createdAt time.Time) ports.IdempotencyMarker {
	return ports.IdempotencyMarker{
		Key:         newIdempotencyKey(),
		Fingerprint: strings.Repeat("f", 64),
		Response:    ports.StoredResponse{Outcome: "joined", Body: []byte(`{"crewId":"c1"}`)},
		CreatedAt:   createdAt,
	}
}

// findMarkers returns Find's answer for the markers' keys, failing the case on error.
func findMarkers(t *testing.T, ctx context.Context, s ports.Stores, markers ...ports.IdempotencyMarker) map[ports.IdempotencyKey]ports.IdempotencyMarker {
	t.Helper()
	keys := make([]ports.IdempotencyKey, len(markers))
	for i, m := range markers {
		keys[i] = m.Key
	}
	found, err := s.Markers.Find(ctx, keys)
	must(t, err, "find")
	return found
}

// expectFound checks that found holds exactly the markers want, field by field.
func expectFound(t *testing.T, found map[ports.IdempotencyKey]ports.IdempotencyMarker, want []ports.IdempotencyMarker, what string) {
	t.Helper()
	if len(found) != len(want) {
		t.Errorf("%s: found %d markers, want %d", what, len(found), len(want))
	}
	for _, w := range want {
		got, ok := found[w.Key]
		switch {
		case !ok:
			t.Errorf("%s: marker %v not found", what, w.Key)
		case got.Key != w.Key || got.Fingerprint != w.Fingerprint ||
			got.Response.Outcome != w.Response.Outcome || !bytes.Equal(got.Response.Body, w.Response.Body) ||
			!got.CreatedAt.Equal(w.CreatedAt) || got.CreatedAt.Location() != time.UTC:
			t.Errorf("%s: marker\n%+v\nwant\n%+v (created in UTC)", what, got, w)
		}
	}
}

func testMarkerSaveThenFind(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	binary, empty, plain := newMarker(now()), newMarker(now().Add(time.Microsecond)), newMarker(now())
	binary.Response.Body = []byte("\x00\xff binary-safe")
	empty.Response = ports.StoredResponse{Outcome: "left"}

	err := e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
		return e.impl.Markers.Save(ctx, []ports.IdempotencyMarker{binary, empty, plain})
	})
	must(t, err, "save")

	expectFound(t, findMarkers(t, ctx, e.impl, binary, empty, plain, newMarker(now())), []ports.IdempotencyMarker{binary, empty, plain}, "after commit")
	found, err := e.impl.Markers.Find(ctx, nil)
	must(t, err, "find no keys")
	expectEqual(t, len(found), 0, "markers found for no keys")
}

// testMarkerKeysMatchExactly: keys that differ only in case or in trailing spaces (a key is
// printable ASCII, space included), or pair the same strings the other way round, name
// different markers.
func testMarkerKeysMatchExactly(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	base := newMarker(now())
	variants := []ports.IdempotencyKey{
		{Scope: strings.ToLower(base.Key.Scope), Key: base.Key.Key},
		{Scope: base.Key.Scope, Key: strings.ToLower(base.Key.Key)},
		{Scope: base.Key.Key, Key: base.Key.Scope},
		{Scope: base.Key.Scope, Key: base.Key.Key + " "},
		{Scope: base.Key.Scope + " ", Key: base.Key.Key},
	}
	markers := []ports.IdempotencyMarker{base}
	for i, key := range variants {
		m := base
		m.Key, m.Fingerprint = key, strings.Repeat(string(rune('a'+i)), 64)
		markers = append(markers, m)
	}

	must(t, e.impl.Markers.Save(ctx, markers), "save keys differing in case, trailing spaces or order")

	expectFound(t, findMarkers(t, ctx, e.impl, markers...), markers, "each key finds its own marker")
}

func testMarkerFindSeesOwnTransaction(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	marker := newMarker(now())

	err := e.impl.Tx.InTx(ctx, func(txCtx context.Context) error {
		if err := e.impl.Markers.Save(txCtx, []ports.IdempotencyMarker{marker}); err != nil {
			return err
		}
		expectFound(t, findMarkers(t, txCtx, e.impl, marker), []ports.IdempotencyMarker{marker}, "inside the transaction")
		expectFound(t, findMarkers(t, ctx, e.impl, marker), nil, "outside before the commit")
		return nil
	})
	must(t, err, "InTx")

	expectFound(t, findMarkers(t, ctx, e.impl, marker), []ports.IdempotencyMarker{marker}, "after the commit")
}

func testMarkerRollbackDiscards(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	marker := newMarker(now())
	abort := errors.New("the business write failed")

	err := e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
		if err := e.impl.Markers.Save(ctx, []ports.IdempotencyMarker{marker}); err != nil {
			return err
		}
		return abort
	})

	if !errors.Is(err, abort) {
		t.Fatalf("InTx returned %v, want fn's error", err)
	}
	expectFound(t, findMarkers(t, ctx, e.impl, marker), nil, "after rollback")
	must(t, e.impl.Markers.Save(ctx, []ports.IdempotencyMarker{marker}), "the key is free again")
}

func testMarkerSaveWithStoredKeySavesNone(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	stored := newMarker(now())
	must(t, e.impl.Markers.Save(ctx, []ports.IdempotencyMarker{stored}), "save")
	again := stored
	again.Fingerprint = strings.Repeat("0", 64)
	fresh := newMarker(now())

	err := e.impl.Markers.Save(ctx, []ports.IdempotencyMarker{fresh, again})

	expectIs(t, err, ports.ErrMarkerExists, "batch with a stored key")
	expectFound(t, findMarkers(t, ctx, e.impl, stored, fresh), []ports.IdempotencyMarker{stored}, "after the failed batch")
}

// testMarkerConcurrentSaves: transactions racing to save one key all reach the unique key;
// the first to commit wins, every other gets ports.ErrMarkerExists, and the winner's marker
// is the one stored.
func testMarkerConcurrentSaves(t *testing.T, e env[ports.Stores]) {
	const savers = 20
	key := newIdempotencyKey()
	markers := make([]ports.IdempotencyMarker, savers)
	for i := range markers {
		markers[i] = newMarker(now())
		markers[i].Key = key
		markers[i].Response.Outcome = "saver-" + randomID()
	}

	errs := startTogether(savers, func(i int) error {
		return e.impl.Tx.InTx(context.Background(), func(ctx context.Context) error {
			return e.impl.Markers.Save(ctx, []ports.IdempotencyMarker{markers[i]})
		})
	})

	if winner := expectOneWinner(t, errs, ports.ErrMarkerExists); winner >= 0 {
		found := findMarkers(t, context.Background(), e.impl, markers[winner])
		expectFound(t, found, []ports.IdempotencyMarker{markers[winner]}, "the winner's marker")
	}
}

// testMarkerPrune stores markers one second apart in pruneEra, out of order, and prunes them in
// steps: each step deletes the oldest, no more than its limit and none created at or after its
// time.
func testMarkerPrune(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	markers := make([]ports.IdempotencyMarker, 5)
	for i := range markers {
		markers[i] = newMarker(pruneEra.Add(time.Duration(i) * time.Second))
	}
	recent := newMarker(now())
	all := append([]ports.IdempotencyMarker{recent}, markers...)
	must(t, e.impl.Markers.Save(ctx, []ports.IdempotencyMarker{markers[3], markers[0], recent, markers[4], markers[2], markers[1]}), "save")

	steps := []struct {
		name    string
		before  time.Time
		limit   int
		deleted int
		remain  []ports.IdempotencyMarker
	}{
		{"no limit deletes nothing", pruneEra.Add(time.Hour), 0, 0, all},
		{"none created before", pruneEra, 10, 0, all},
		{"limit stops at the oldest two", pruneEra.Add(time.Hour), 2, 2, []ports.IdempotencyMarker{recent, markers[2], markers[3], markers[4]}},
		{"time stops before the fourth", pruneEra.Add(3 * time.Second), 10, 1, []ports.IdempotencyMarker{recent, markers[3], markers[4]}},
		{"the rest of the era", pruneEra.Add(time.Hour), 10, 2, []ports.IdempotencyMarker{recent}},
	}
	for _, step := range steps {
		deleted, err := e.impl.Markers.Prune(ctx, step.before, step.limit)
		must(t, err, step.name)

		expectEqual(t, deleted, step.deleted, step.name+": deleted")
		expectFound(t, findMarkers(t, ctx, e.impl, all...), step.remain, step.name)
	}
}
