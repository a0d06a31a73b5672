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
	g := guard.New(memory.NewIdempotencyStore(clock), memory.NewLocker(clock), system.Sleeper{}, guard.Config{})
	crews := appcrew.NewService(db, memory.NewCrewRepository(db), memory.NewCrewMemberRepository(db), g, clock, system.UUIDs{})

	c, _ := crews.Create(ctx, appcrew.CreateCommand{Name: "morning runners", MaxMembers: 1})

	joined, _ := crews.Join(ctx, appcrew.JoinCommand{CrewID: c.ID, UserID: "alice", IdempotencyKey: "k-1"})
	fmt.Println("alice:", joined.Status, joined.Value.CurrentMembers, "of", joined.Value.MaxMembers)

	retried, _ := crews.Join(ctx, appcrew.JoinCommand{CrewID: c.ID, UserID: "alice", IdempotencyKey: "k-1"})
	fmt.Println("alice retries:", retried.Status, "replayed:", retried.Replayed)

	_, err := crews.Join(ctx, appcrew.JoinCommand{CrewID: c.ID, UserID: "bob", IdempotencyKey: "k-1"})
	fmt.Println("bob:", err, errors.Is(err, crew.ErrFull))
	// Output:
	// alice: 201 1 of 1
	// alice retries: 201 replayed: true
	// bob: CREW_FULL: crew is full true
}
