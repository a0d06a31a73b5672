package crew_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/system"
	appcrew "github.com/rushgate/rushgate/application/crew"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain/crew"
)

// A service embeds the crew use cases with its own adapters. Here they are the in-memory ones;
// in production pass gormdb.NewTxRunner(db), gormdb.NewCrewRepository(db), … and
// redis.NewIdempotencyStore / redis.NewLocker, or your own implementations of the ports.
func ExampleService_Join() {
	ctx := context.Background()
	clock := system.Clock{}
	db := memory.NewDatabase()
	g := guard.New(guard.Deps{
		Idempotency: memory.NewIdempotencyStore(clock),
		Locker:      memory.NewLocker(clock),
		Clock:       clock,
		Sleeper:     system.Sleeper{},
		Tx:          db,
		Markers:     memory.NewIdempotencyMarkerRepository(db),
	}, guard.Config{})
	crews := appcrew.NewService(appcrew.Deps{
		Tx:      db,
		Crews:   memory.NewCrewRepository(db),
		Members: memory.NewCrewMemberRepository(db),
		Guard:   g,
		Clock:   clock,
		IDs:     system.UUIDs{},
	}, appcrew.Config{})

	c, _ := crews.Create(ctx, appcrew.CreateCommand{Name: "morning runners", MaxMembers: 1})

	joined, _ := crews.Join(ctx, appcrew.JoinCommand{CrewID: c.ID, UserID: "alice", IdempotencyKey: "k-1"})
	fmt.Println("alice:", joined.Outcome, joined.Value.CurrentMembers, "of", joined.Value.MaxMembers)

	retried, _ := crews.Join(ctx, appcrew.JoinCommand{CrewID: c.ID, UserID: "alice", IdempotencyKey: "k-1"})
	fmt.Println("alice retries:", retried.Outcome, "replayed:", retried.Replayed)

	_, err := crews.Join(ctx, appcrew.JoinCommand{CrewID: c.ID, UserID: "bob", IdempotencyKey: "k-1"})
	fmt.Println("bob:", err, errors.Is(err, crew.ErrFull))
	// Output:
	// alice: created 1 of 1
	// alice retries: created replayed: true
	// bob: CREW_FULL: crew is full true
}
