package porttest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
)

// TestCrewRepositories checks ports.CrewRepository and ports.CrewMemberRepository: Create and
// Get round-trip a crew and an unknown id is crew.ErrNotFound; GetForUpdate fails outside a
// transaction and serialises concurrent joins on one crew, so exactly its capacity of them
// succeed; Save writes the member count; Add inserts a batch all or none, reports an existing
// pair as crew.ErrAlreadyMember (also to the losers of a concurrent race) and an unknown crew
// as crew.ErrNotFound, and a failed Add in a join rolls the count back with it; Existing
// reports exactly the members among the ids asked; Remove and List behave as documented.
func TestCrewRepositories(t *testing.T, newStores func(t *testing.T) ports.Stores, caps Capabilities) {
	run(t, newStores, caps, []testCase[ports.Stores]{
		{"Crew/CreateThenGetRoundTrips", testCrewCreateThenGetRoundTrips},
		{"Crew/UnknownIDIsNotFound", testCrewUnknownIDIsNotFound},
		{"Crew/GetForUpdateOutsideTxFails", testCrewGetForUpdateOutsideTxFails},
		{"Crew/SaveWritesMemberCount", testCrewSaveWritesMemberCount},
		{"Crew/ConcurrentGetForUpdateCallersSerialise", testCrewConcurrentGetForUpdateSerialises},
		{"Member/AddThenExistingAndCount", testMemberAddThenExistingAndCount},
		{"Member/ExistingOfNoneOrUnknownCrewIsEmpty", testMemberExistingOfNothing},
		{"Member/AddWithAnExistingPairInsertsNone", testMemberAddWithExistingPairInsertsNone},
		{"Member/AddToUnknownCrewIsNotFoundAndInsertsNone", testMemberAddToUnknownCrew},
		{"Member/ConcurrentAddsOfOnePairOneWins", testMemberConcurrentAddsOfOnePair},
		{"Member/ConcurrentOverlappingBatchesOneWinsWhole", testMemberConcurrentOverlappingBatches},
		{"Member/FailedAddInJoinRollsBackTheCount", testMemberFailedAddRollsBackCount},
		{"Member/RemoveDeletesOrIsNotMember", testMemberRemove},
		{"Member/ListPagesInOrderAfterCursor", testMemberListPages},
		{"Member/ListOfEmptyCrewIsEmpty", testMemberListOfEmptyCrew},
	})
}

// createCrew stores a new empty crew with a random id and the given capacity.
func createCrew(t *testing.T, s ports.Stores, maxMembers int) *crew.Crew {
	t.Helper()
	c, err := crew.New(randomID(), "contract crew", maxMembers, now())
	must(t, err, "new crew")
	must(t, s.Crews.Create(context.Background(), c), "create crew")
	return c
}

// newUserID returns a random user id.
func newUserID() string { return "user-" + randomID() }

// newMember returns a member of crewID with a random user id.
func newMember(crewID string) crew.Member {
	return crew.Member{CrewID: crewID, UserID: newUserID(), JoinedAt: now()}
}

// joinInTx is the crew join use case's transaction: lock the crew, take a seat, store both.
func joinInTx(ctx context.Context, s ports.Stores, crewID, userID string) error {
	return s.Tx.InTx(ctx, func(ctx context.Context) error {
		c, err := s.Crews.GetForUpdate(ctx, crewID)
		if err != nil {
			return err
		}
		m, err := c.Join(userID, now())
		if err != nil {
			return err
		}
		if err := s.Crews.Save(ctx, c); err != nil {
			return err
		}
		return s.CrewMembers.Add(ctx, m)
	})
}

// storedCount returns the crew's stored member count and its number of member rows.
func storedCount(t *testing.T, s ports.Stores, crewID string) (currentMembers, members int) {
	t.Helper()
	ctx := context.Background()
	c, err := s.Crews.Get(ctx, crewID)
	must(t, err, "get crew")
	members, err = s.CrewMembers.Count(ctx, crewID)
	must(t, err, "count members")
	return c.CurrentMembers(), members
}

// existing returns Existing's answer for userIDs, failing the case on error.
func existing(t *testing.T, s ports.Stores, crewID string, userIDs ...string) map[string]bool {
	t.Helper()
	set, err := s.CrewMembers.Existing(context.Background(), crewID, userIDs)
	must(t, err, "existing members")
	return set
}

func expectSameCrew(t *testing.T, got, want *crew.Crew) {
	t.Helper()
	expectEqual(t, got.ID(), want.ID(), "id")
	expectEqual(t, got.Name(), want.Name(), "name")
	expectEqual(t, got.MaxMembers(), want.MaxMembers(), "max members")
	expectEqual(t, got.CurrentMembers(), want.CurrentMembers(), "current members")
	if !got.CreatedAt().Equal(want.CreatedAt()) || got.CreatedAt().Location() != time.UTC {
		t.Errorf("createdAt %v, want %v in UTC", got.CreatedAt(), want.CreatedAt())
	}
}

func testCrewCreateThenGetRoundTrips(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	created := createCrew(t, e.impl, 42)

	got, err := e.impl.Crews.Get(ctx, created.ID())
	must(t, err, "get")
	expectSameCrew(t, got, created)

	err = e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
		locked, err := e.impl.Crews.GetForUpdate(ctx, created.ID())
		if err != nil {
			return err
		}
		expectSameCrew(t, locked, created)
		return nil
	})
	must(t, err, "get for update")
}

func testCrewUnknownIDIsNotFound(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	unknown := randomID()

	_, err := e.impl.Crews.Get(ctx, unknown)
	expectIs(t, err, crew.ErrNotFound, "Get")

	err = e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
		_, err := e.impl.Crews.GetForUpdate(ctx, unknown)
		return err
	})
	expectIs(t, err, crew.ErrNotFound, "GetForUpdate")
}

func testCrewGetForUpdateOutsideTxFails(t *testing.T, e env[ports.Stores]) {
	c := createCrew(t, e.impl, 5)

	got, err := e.impl.Crews.GetForUpdate(context.Background(), c.ID())

	if err == nil || got != nil {
		t.Errorf("GetForUpdate outside a transaction: %v, %v; want an error", got, err)
	}
}

func testCrewSaveWritesMemberCount(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c := createCrew(t, e.impl, 5)
	for range 3 {
		_, err := c.Join(newUserID(), now())
		must(t, err, "join")
	}
	must(t, e.impl.Crews.Save(ctx, c), "save")

	got, err := e.impl.Crews.Get(ctx, c.ID())
	must(t, err, "get")
	expectSameCrew(t, got, c)

	got.Leave()
	must(t, e.impl.Crews.Save(ctx, got), "save after leave")
	got, err = e.impl.Crews.Get(ctx, c.ID())
	must(t, err, "get after leave")
	expectEqual(t, got.CurrentMembers(), 2, "members after one left")
}

// testCrewConcurrentGetForUpdateSerialises runs the join transaction from many goroutines on one
// crew: only if each sees the previous one's committed count do exactly maxMembers succeed.
func testCrewConcurrentGetForUpdateSerialises(t *testing.T, e env[ports.Stores]) {
	const joiners, capacity = 50, 30
	c := createCrew(t, e.impl, capacity)

	errs := startTogether(joiners, func(int) error {
		return joinInTx(context.Background(), e.impl, c.ID(), newUserID())
	})

	joined, full := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			joined++
		case errors.Is(err, crew.ErrFull):
			full++
		default:
			t.Errorf("join failed: %v", err)
		}
	}
	expectEqual(t, joined, capacity, "joined")
	expectEqual(t, full, joiners-capacity, "refused as full")
	currentMembers, members := storedCount(t, e.impl, c.ID())
	expectEqual(t, currentMembers, capacity, "stored count")
	expectEqual(t, members, capacity, "member rows")
}

func testMemberAddThenExistingAndCount(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c, other := createCrew(t, e.impl, 10), createCrew(t, e.impl, 10)
	first, second, third, outsider := newMember(c.ID()), newMember(c.ID()), newMember(c.ID()), newUserID()

	must(t, e.impl.CrewMembers.Add(ctx, first), "add one")
	must(t, e.impl.CrewMembers.Add(ctx, second, third), "add a batch")
	// Uniqueness is per pair: the same user may join another crew.
	must(t, e.impl.CrewMembers.Add(ctx, crew.Member{CrewID: other.ID(), UserID: first.UserID, JoinedAt: now()}), "add to other crew")

	got := existing(t, e.impl, c.ID(), first.UserID, outsider, second.UserID, third.UserID)
	want := map[string]bool{first.UserID: true, second.UserID: true, third.UserID: true}
	if len(got) != len(want) || !got[first.UserID] || !got[second.UserID] || !got[third.UserID] {
		t.Errorf("Existing = %v, want exactly %v", got, want)
	}
	count, err := e.impl.CrewMembers.Count(ctx, c.ID())
	must(t, err, "count")
	expectEqual(t, count, 3, "members of the crew")
	count, err = e.impl.CrewMembers.Count(ctx, other.ID())
	must(t, err, "count other")
	expectEqual(t, count, 1, "members of the other crew")
}

func testMemberExistingOfNothing(t *testing.T, e env[ports.Stores]) {
	c := createCrew(t, e.impl, 10)
	member := newMember(c.ID())
	must(t, e.impl.CrewMembers.Add(context.Background(), member), "add")

	cases := []struct {
		name    string
		crewID  string
		userIDs []string
	}{
		{"no ids", c.ID(), nil},
		{"no members among the ids", c.ID(), []string{newUserID(), newUserID()}},
		{"unknown crew", randomID(), []string{member.UserID}},
	}
	for _, tc := range cases {
		if got := existing(t, e.impl, tc.crewID, tc.userIDs...); len(got) != 0 {
			t.Errorf("%s: Existing = %v, want an empty set", tc.name, got)
		}
	}
}

// testMemberAddWithExistingPairInsertsNone: one existing pair fails the whole batch with
// crew.ErrAlreadyMember, wherever it sits in the batch, and none of the new members is stored.
func testMemberAddWithExistingPairInsertsNone(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c := createCrew(t, e.impl, 10)
	member := newMember(c.ID())
	must(t, e.impl.CrewMembers.Add(ctx, member), "add")
	again := member
	again.JoinedAt = member.JoinedAt.Add(time.Second)

	batches := map[string][]crew.Member{
		"alone":  {again},
		"first":  {again, newMember(c.ID())},
		"last":   {newMember(c.ID()), newMember(c.ID()), again},
		"middle": {newMember(c.ID()), again, newMember(c.ID())},
	}
	for name, batch := range batches {
		err := e.impl.CrewMembers.Add(ctx, batch...)

		expectIs(t, err, crew.ErrAlreadyMember, name)
		count, err := e.impl.CrewMembers.Count(ctx, c.ID())
		must(t, err, "count")
		expectEqual(t, count, 1, name+": members after the failed batch")
	}
}

func testMemberAddToUnknownCrew(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c := createCrew(t, e.impl, 10)
	unknown := randomID()

	expectIs(t, e.impl.CrewMembers.Add(ctx, newMember(unknown)), crew.ErrNotFound, "alone")
	expectIs(t, e.impl.CrewMembers.Add(ctx, newMember(c.ID()), newMember(unknown)), crew.ErrNotFound, "in a batch")

	count, err := e.impl.CrewMembers.Count(ctx, c.ID())
	must(t, err, "count")
	expectEqual(t, count, 0, "members of the known crew after the failed batch")
}

// testMemberConcurrentAddsOfOnePair: transactions racing to insert one pair all reach the
// unique key; the first to commit wins and every other gets crew.ErrAlreadyMember.
func testMemberConcurrentAddsOfOnePair(t *testing.T, e env[ports.Stores]) {
	const adders = 20
	c := createCrew(t, e.impl, 10)
	m := newMember(c.ID())

	errs := startTogether(adders, func(int) error {
		return e.impl.Tx.InTx(context.Background(), func(ctx context.Context) error {
			return e.impl.CrewMembers.Add(ctx, m)
		})
	})

	expectOneWinner(t, errs, crew.ErrAlreadyMember)
	_, members := storedCount(t, e.impl, c.ID())
	expectEqual(t, members, 1, "member rows")
}

// testMemberConcurrentOverlappingBatches: batches that each carry a member of their own and one
// shared member race; exactly one commits, whole, and no loser leaves its own member behind.
func testMemberConcurrentOverlappingBatches(t *testing.T, e env[ports.Stores]) {
	const adders = 10
	c := createCrew(t, e.impl, adders+1)
	shared := newMember(c.ID())
	own := make([]crew.Member, adders)
	for i := range own {
		own[i] = newMember(c.ID())
	}

	errs := startTogether(adders, func(i int) error {
		return e.impl.Tx.InTx(context.Background(), func(ctx context.Context) error {
			return e.impl.CrewMembers.Add(ctx, own[i], shared)
		})
	})

	winner := expectOneWinner(t, errs, crew.ErrAlreadyMember)
	userIDs := []string{shared.UserID}
	for _, m := range own {
		userIDs = append(userIDs, m.UserID)
	}
	got := existing(t, e.impl, c.ID(), userIDs...)
	if winner >= 0 && (len(got) != 2 || !got[shared.UserID] || !got[own[winner].UserID]) {
		t.Errorf("members after the race: %v, want the shared one and the winner's own only", got)
	}
}

// testMemberFailedAddRollsBackCount: a join transaction saves the new count, then its Add fails
// on an existing pair; the failure reaches InTx, which rolls the count back, so the stored
// count and the member rows still agree.
func testMemberFailedAddRollsBackCount(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c := createCrew(t, e.impl, 10)
	member := newMember(c.ID())
	must(t, joinInTx(ctx, e.impl, c.ID(), member.UserID), "first join")

	cases := []struct {
		name string
		add  func(ctx context.Context, newcomer crew.Member) error
	}{
		{"the same user joins again", func(ctx context.Context, _ crew.Member) error {
			return e.impl.CrewMembers.Add(ctx, member)
		}},
		{"a batch carrying the same user", func(ctx context.Context, newcomer crew.Member) error {
			return e.impl.CrewMembers.Add(ctx, newcomer, member)
		}},
	}
	for _, tc := range cases {
		newcomer := newMember(c.ID())
		err := e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
			locked, err := e.impl.Crews.GetForUpdate(ctx, c.ID())
			if err != nil {
				return err
			}
			if _, err := locked.Join(newcomer.UserID, now()); err != nil {
				return err
			}
			if err := e.impl.Crews.Save(ctx, locked); err != nil {
				return err
			}
			return tc.add(ctx, newcomer)
		})

		expectIs(t, err, crew.ErrAlreadyMember, tc.name)
		currentMembers, members := storedCount(t, e.impl, c.ID())
		expectEqual(t, currentMembers, 1, tc.name+": stored count")
		expectEqual(t, members, 1, tc.name+": member rows")
	}
}

func testMemberRemove(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c := createCrew(t, e.impl, 10)
	stays, leaves := newMember(c.ID()), newMember(c.ID())
	must(t, e.impl.CrewMembers.Add(ctx, stays, leaves), "add")

	must(t, e.impl.CrewMembers.Remove(ctx, c.ID(), leaves.UserID), "remove")

	got := existing(t, e.impl, c.ID(), stays.UserID, leaves.UserID)
	if len(got) != 1 || !got[stays.UserID] {
		t.Errorf("Existing after remove = %v, want only the member who stayed", got)
	}
	expectIs(t, e.impl.CrewMembers.Remove(ctx, c.ID(), leaves.UserID), crew.ErrNotMember, "removed twice")
	expectIs(t, e.impl.CrewMembers.Remove(ctx, c.ID(), newUserID()), crew.ErrNotMember, "never joined")
	expectIs(t, e.impl.CrewMembers.Remove(ctx, randomID(), stays.UserID), crew.ErrNotMember, "unknown crew")

	must(t, e.impl.CrewMembers.Add(ctx, leaves), "a removed member joins again")
}

// testMemberListPages stores members out of order, several sharing a join time, and reads them
// back page by page: the pages concatenate to the (JoinedAt, UserID) order, times intact.
func testMemberListPages(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c, other := createCrew(t, e.impl, 100), createCrew(t, e.impl, 100)
	t0 := now()
	at := func(micros int) time.Time { return t0.Add(time.Duration(micros) * time.Microsecond) }
	member := func(userID string, joinedAt time.Time) crew.Member {
		return crew.Member{CrewID: c.ID(), UserID: userID, JoinedAt: joinedAt}
	}
	// Ties on JoinedAt are broken by UserID compared byte-wise: "B" < "a" < "b".
	want := []crew.Member{
		member("user-3", at(0)),
		member("user-B", at(1)),
		member("user-a", at(1)),
		member("user-b", at(1)),
		member("user-1", at(2)),
		member("user-0", at(1_000_000)),
		member("user-2", at(1_000_001)),
	}
	for _, i := range []int{4, 2, 6, 0, 3, 5, 1} {
		must(t, e.impl.CrewMembers.Add(ctx, want[i]), "add")
	}
	must(t, e.impl.CrewMembers.Add(ctx, crew.Member{CrewID: other.ID(), UserID: "user-a", JoinedAt: at(1)}), "add to other crew")

	const limit = 3
	var got []crew.Member
	var after *ports.MemberCursor
	for range len(want) {
		page, err := e.impl.CrewMembers.List(ctx, c.ID(), after, limit)
		must(t, err, "list")
		if len(page) > limit {
			t.Fatalf("page of %d members, limit %d", len(page), limit)
		}
		got = append(got, page...)
		if len(page) < limit {
			break
		}
		last := page[len(page)-1]
		after = &ports.MemberCursor{JoinedAt: last.JoinedAt, UserID: last.UserID}
	}
	expectSameMembers(t, got, want, "pages")

	all, err := e.impl.CrewMembers.List(ctx, c.ID(), nil, 100)
	must(t, err, "list all")
	expectSameMembers(t, all, want, "one page")

	end := want[len(want)-1]
	rest, err := e.impl.CrewMembers.List(ctx, c.ID(), &ports.MemberCursor{JoinedAt: end.JoinedAt, UserID: end.UserID}, limit)
	must(t, err, "list after the last")
	expectSameMembers(t, rest, nil, "after the last")
}

// expectSameMembers compares member lists, join times by instant and in UTC.
func expectSameMembers(t *testing.T, got, want []crew.Member, what string) {
	t.Helper()
	same := slices.EqualFunc(got, want, func(g, w crew.Member) bool {
		return g.CrewID == w.CrewID && g.UserID == w.UserID &&
			g.JoinedAt.Equal(w.JoinedAt) && g.JoinedAt.Location() == time.UTC
	})
	if !same {
		t.Errorf("%s: members\n%v\nwant\n%v", what, got, want)
	}
}

func testMemberListOfEmptyCrew(t *testing.T, e env[ports.Stores]) {
	c := createCrew(t, e.impl, 10)

	page, err := e.impl.CrewMembers.List(context.Background(), c.ID(), nil, 10)

	must(t, err, "list")
	expectSameMembers(t, page, nil, "empty crew")
}
