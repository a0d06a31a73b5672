package crew_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/system"
	appcrew "github.com/rushgate/rushgate/application/crew"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/guard/guardtest"
	"github.com/rushgate/rushgate/test/testkit"
)

// alone is how long a Redis call is held for a partner before it counts as a wait of its own:
// only a regression waits for it, and a partner that exists comes far sooner.
const alone = 10 * time.Second

// TestJoin_AnUncontendedJoinWaitsForTwoRedisRoundTrips: a join of a crew nobody else is joining
// takes its idempotency key while it takes the crew's lock, and stores its answer while it
// releases the lock — four calls to Redis, waited for in two turns (it waited for four, one
// after another, when each waited for the one before).
func TestJoin_AnUncontendedJoinWaitsForTwoRedisRoundTrips(t *testing.T) {
	ctx := context.Background()
	clock := system.Clock{}
	db := memory.NewDatabase()
	trips := guardtest.NewRoundTrips(alone)
	g := guard.New(guard.Deps{
		Idempotency: trips.Store(memory.NewIdempotencyStore(clock)),
		Locker:      trips.Locker(memory.NewLocker(clock)),
		Clock:       clock, Sleeper: system.Sleeper{},
		Tx: db, Markers: memory.NewIdempotencyMarkerRepository(db),
	}, guard.Config{})
	crews := appcrew.NewService(appcrew.Deps{Tx: db, Crews: memory.NewCrewRepository(db),
		Members: memory.NewCrewMemberRepository(db), Guard: g, Clock: clock, IDs: system.UUIDs{}}, appcrew.Config{})
	c, err := crews.Create(ctx, appcrew.CreateCommand{Name: "counted", MaxMembers: 10})
	if err != nil {
		t.Fatal(err)
	}

	res, err := crews.Join(ctx, appcrew.JoinCommand{CrewID: c.ID, UserID: "alice", IdempotencyKey: "k-alice"})
	if err != nil || res.Value.CurrentMembers != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
	// The release may still be on its way once the answer is out; it went with the record.
	testkit.Eventually(t, alone, "the lock released", func() error {
		if waits := fmt.Sprint(trips.Waits()); !strings.Contains(waits, "release") {
			return fmt.Errorf("waits so far %s", waits)
		}
		return nil
	})
	if got, want := fmt.Sprint(trips.Waits()), "[acquire+begin complete+release]"; got != want {
		t.Fatalf("the Redis calls of one join, by sequential wait: %s, want %s", got, want)
	}
}
