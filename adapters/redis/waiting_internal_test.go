package redis

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// The combined scripts must answer a batch exactly as that many single calls in a row would,
// whatever the batch mixes: new users, a user already waiting, an admitted user, one user twice.
func TestWaitingRoom_ABatchAnswersAsSingleCallsInARow(t *testing.T) {
	ctx := context.Background()
	client, err := NewClient("redis://"+testenv.RedisAddr(t), Options{
		DialTimeout: testenv.DependencyTimeout, ReadTimeout: testenv.DependencyTimeout, WriteTimeout: testenv.DependencyTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	w := NewWaitingRoom(client, "rushgate:test:"+uuid.NewString()+":")
	event := uuid.NewString()
	if err := w.Open(ctx, event, 1, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Enter(ctx, event, "admitted"); err != nil {
		t.Fatal(err)
	}
	if claim, err := w.Claim(ctx, event, "admitted", "tok", time.Minute); err != nil || !claim.Claimed {
		t.Fatalf("claim = %+v, %v", claim, err)
	}
	if _, err := w.Enter(ctx, event, "waiting"); err != nil {
		t.Fatal(err)
	}

	entered, err := w.enterAll(ctx, event, []string{"a", "waiting", "a", "admitted", "b"})
	if err != nil {
		t.Fatal(err)
	}
	// rank, remaining, created (remaining is 0: the one slot is taken); the admitted user's
	// token expires within the claim's minute.
	want := []string{"WAITING 1 0 true", "WAITING 0 0 false", "WAITING 1 0 false", "ENTERED", "WAITING 2 0 true"}
	if len(entered) != len(want) {
		t.Fatalf("%d enter answers, want %d: %v", len(entered), len(want), entered)
	}
	for i, p := range entered {
		var got string
		switch {
		case !p.Admitted:
			got = fmt.Sprintf("WAITING %d %d %v", p.Rank, p.RemainingSlots, p.Created)
		case p.ExpiresAt.After(time.Now().Add(-time.Second)) && p.ExpiresAt.Before(time.Now().Add(time.Minute+time.Second)):
			got = "ENTERED"
		default:
			got = fmt.Sprintf("ENTERED, expiring at %v", p.ExpiresAt)
		}
		if got != want[i] {
			t.Errorf("enter answer %d = %q, want %q", i, got, want[i])
		}
	}

	polled, err := w.positionsOf(ctx, positionKey{eventID: event, ttl: time.Hour}, []string{"b", "admitted", "nobody", "a"})
	if err != nil {
		t.Fatal(err)
	}
	// rank and remaining while waiting (remaining is 0: the one slot is taken).
	wantPolled := []string{"WAITING 2 0", "ENTERED", "NOT_QUEUED", "WAITING 1 0"}
	if len(polled) != len(wantPolled) {
		t.Fatalf("%d position answers, want %d: %v", len(polled), len(wantPolled), polled)
	}
	for i, answer := range polled {
		var got string
		switch p := answer.place; {
		case !answer.queued:
			got = "NOT_QUEUED"
		case !p.Admitted:
			got = fmt.Sprintf("WAITING %d %d", p.Rank, p.RemainingSlots)
		case p.ExpiresAt.Before(time.Now().Add(59 * time.Minute)):
			got = "ENTERED without the refreshed expiry"
		default:
			got = "ENTERED"
		}
		if got != wantPolled[i] {
			t.Errorf("position answer %d = %q, want %q", i, got, wantPolled[i])
		}
	}
	stats, err := w.Stats(ctx, event)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Waiting != 3 || stats.Admitted != 1 {
		t.Errorf("room holds %d waiting and %d admitted, want 3 and 1", stats.Waiting, stats.Admitted)
	}
}

// A pull crowd's first polls each record one estimate: recorded at once they share script calls
// (one each was a round trip per poll), and every user's first estimate is kept, later ones not.
func TestWaitingRoom_ConcurrentEstimatesShareScriptCalls(t *testing.T) {
	const users = 200
	ctx := context.Background()
	prefix := "rushgate:test:" + uuid.NewString() + ":"
	w, client, trips := countingRoom(t, "redis://"+testenv.RedisAddr(t), prefix)
	event := uuid.NewString()
	if err := w.Open(ctx, event, 1, 10); err != nil {
		t.Fatal(err)
	}
	for i := range users {
		if _, err := w.Enter(ctx, event, fmt.Sprintf("user-%d", i)); err != nil {
			t.Fatal(err)
		}
	}

	mark := trips.mark()
	errs := make([]error, users)
	testkit.StartTogether(users, func(i int) {
		errs[i] = w.Predict(ctx, event, map[string]int{fmt.Sprintf("user-%d", i): i})
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("predict user-%d: %v", i, err)
		}
	}
	calls := 0
	for _, trip := range trips.since(mark) {
		if trip == "predict" {
			calls++
		}
	}
	if calls == 0 || calls > users/4 {
		t.Errorf("%d concurrent estimates took %d script calls, want at most %d", users, calls, users/4)
	}
	if err := w.Predict(ctx, event, map[string]int{"user-7": 999}); err != nil {
		t.Fatal(err)
	}

	recorded, err := client.HGetAll(ctx, w.keys(event)[8]).Result() // …:predicted
	if err != nil {
		t.Fatal(err)
	}
	if len(recorded) != users {
		t.Fatalf("%d estimates recorded, want %d", len(recorded), users)
	}
	for i := range users {
		// now:seconds, the first estimate.
		if v := recorded[fmt.Sprintf("user-%d", i)]; !strings.HasSuffix(v, fmt.Sprintf(":%d", i)) {
			t.Errorf("user-%d's estimate is %q, want its first, %d s", i, v, i)
		}
	}
}
