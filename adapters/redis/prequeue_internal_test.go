package redis

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/domain/draw"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// prequeueCrowd is the pre-queue of the prequeue-open load scenario.
const prequeueCrowd = 100_000

// gatedCrowd opens a gated room on w and pre-queues prequeueCrowd users straight into its
// keys (the entries are not under test), then waits for the Redis clock to pass opensAt.
func gatedCrowd(t *testing.T, w *WaitingRoom) (string, []string) {
	t.Helper()
	ctx := context.Background()
	eventID := uuid.NewString()
	keys := w.keys(eventID)
	t.Cleanup(func() { _ = w.client.Del(context.WithoutCancel(ctx), keys...).Err() })
	if err := w.OpenGated(ctx, eventID, 10, 10, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.client.SRem(context.WithoutCancel(ctx), w.indexKey(), eventID).Err() })
	users := make([]string, prequeueCrowd)
	for i := range users {
		users[i] = fmt.Sprint("user-", i)
	}
	for start := 0; start < len(users); start += 10_000 {
		members := make([]goredis.Z, 0, 10_000)
		for i, u := range users[start:min(len(users), start+10_000)] {
			members = append(members, goredis.Z{Score: float64(start + i + 1), Member: u})
		}
		if err := w.client.ZAdd(ctx, keys[7], members...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.client.HSet(ctx, keys[0], "seq", len(users)).Err(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Second+testenv.DependencyTimeout, "opensAt by the Redis clock", func() error {
		_, _, err := w.Prequeued(ctx, eventID)
		return err
	})
	return eventID, users
}

// TestPrequeue_PlacingACrowdIsShortSteps places 100,000 pre-queued users as an opening does
// and counts it: the round trips (a page of the read per 10,000 users, a pipeline per 20,000
// placed, one opening step) and, placing a second crowd one step per round trip, the longest
// step, an upper bound of the longest time Redis is blocked. The line is the draw order.
func TestPrequeue_PlacingACrowdIsShortSteps(t *testing.T) {
	testenv.Long(t, "100,000 users")
	ctx := context.Background()
	w, _, trips := countingRoom(t, "redis://"+testenv.RedisAddr(t), "rushgate:test:"+uuid.NewString()+":")
	seed, err := draw.RandomSeed()
	if err != nil {
		t.Fatal(err)
	}

	eventID, _ := gatedCrowd(t, w)
	mark := trips.mark()
	start := time.Now()
	arrivals, _, err := w.Prequeued(ctx, eventID)
	if err != nil {
		t.Fatal(err)
	}
	readTrips, read := trips.mark()-mark, time.Since(start)
	ordering := time.Now()
	order := draw.OrderUsers(seed, arrivals)
	ordered := time.Since(ordering)
	mark = trips.mark()
	placing := time.Now()
	placed, err := w.PlacePrequeue(ctx, eventID, order)
	if err != nil {
		t.Fatal(err)
	}
	rest, opened, err := w.OpenPrequeue(ctx, eventID)
	if err != nil || !opened || placed+rest != prequeueCrowd {
		t.Fatalf("placed %d then %d, opened %v: %v", placed, rest, opened, err)
	}
	placeTrips, place := trips.mark()-mark, time.Since(placing)
	line, err := w.client.ZRange(ctx, w.keys(eventID)[1], 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(line, order) {
		t.Fatal("the line is not the draw order")
	}
	wantTrips := prequeueCrowd/prequeuePage + 1 + prequeueCrowd/(placeChunk*placePipeline) + 1
	if readTrips+placeTrips > wantTrips+2 { // +2: a script sent again with its text, once each
		t.Errorf("%d round trips to read and place, want about %d: %v", readTrips+placeTrips, wantTrips,
			trips.since(mark))
	}

	second, _ := gatedCrowd(t, w)
	remaining, _, err := w.Prequeued(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	var longest time.Duration
	for step := range slices.Chunk(draw.OrderUsers(seed, remaining), placeChunk) {
		stepStart := time.Now()
		if _, err := w.placeBatch(ctx, second, step); err != nil {
			t.Fatal(err)
		}
		longest = max(longest, time.Since(stepStart))
	}
	t.Logf("%d users: read in %d round trips (%v), ordered in Go in %v, placed and opened in %d round trips (%v); "+
		"longest placing step of %d users, round trip included: %v (a busy machine: count, do not time)",
		prequeueCrowd, readTrips, read, ordered, placeTrips, place, placeChunk, longest)
}
