package contract_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
)

// TestCrewRepositoryContract checks the sentences of ports.CrewRepository against every backend.
func TestCrewRepositoryContract(t *testing.T) {
	cases := []contractCase[crewStore]{
		{"CreateThenGetRoundTrips", testCrewCreateThenGetRoundTrips},
		{"UnknownIDIsNotFound", testCrewUnknownIDIsNotFound},
		{"GetForUpdateOutsideTxFails", testCrewGetForUpdateOutsideTxFails},
		{"SaveWritesMemberCount", testCrewSaveWritesMemberCount},
		{"ConcurrentGetForUpdateCallersSerialise", testCrewConcurrentGetForUpdateSerialises},
	}
	runContract(t, crewBackends, cases)
}

// TestCrewMemberRepositoryContract checks the sentences of ports.CrewMemberRepository against
// every backend.
func TestCrewMemberRepositoryContract(t *testing.T) {
	cases := []contractCase[crewStore]{
		{"AddThenExistsAndCount", testMemberAddThenExistsAndCount},
		{"AddOfExistingPairIsAlreadyMember", testMemberAddOfExistingPairIsAlreadyMember},
		{"ConcurrentAddsOfOnePairOneWins", testMemberConcurrentAddsOfOnePair},
		{"RemoveDeletesOrIsNotMember", testMemberRemove},
		{"ListPagesInOrderAfterCursor", testMemberListPages},
		{"ListOfEmptyCrewIsEmpty", testMemberListOfEmptyCrew},
	}
	runContract(t, crewBackends, cases)
}

func testCrewCreateThenGetRoundTrips(t *testing.T, s crewStore) {
	ctx := context.Background()
	created := createCrew(t, s, 42)

	got, err := s.crews.Get(ctx, created.ID())
	require.NoError(t, err)
	assertSameCrew(t, created, got)

	err = s.tx.InTx(ctx, func(ctx context.Context) error {
		locked, err := s.crews.GetForUpdate(ctx, created.ID())
		require.NoError(t, err)
		assertSameCrew(t, created, locked)
		return nil
	})
	require.NoError(t, err)
}

func assertSameCrew(t *testing.T, want, got *crew.Crew) {
	t.Helper()
	assert.Equal(t, want.ID(), got.ID())
	assert.Equal(t, want.Name(), got.Name())
	assert.Equal(t, want.MaxMembers(), got.MaxMembers())
	assert.Equal(t, want.CurrentMembers(), got.CurrentMembers())
	assert.True(t, want.CreatedAt().Equal(got.CreatedAt()), "createdAt %v, want %v", got.CreatedAt(), want.CreatedAt())
	assert.Equal(t, time.UTC, got.CreatedAt().Location())
}

func testCrewUnknownIDIsNotFound(t *testing.T, s crewStore) {
	ctx := context.Background()
	unknown := newCrewID()

	_, err := s.crews.Get(ctx, unknown)
	assert.ErrorIs(t, err, crew.ErrNotFound)

	err = s.tx.InTx(ctx, func(ctx context.Context) error {
		_, err := s.crews.GetForUpdate(ctx, unknown)
		return err
	})
	assert.ErrorIs(t, err, crew.ErrNotFound)
}

func testCrewGetForUpdateOutsideTxFails(t *testing.T, s crewStore) {
	c := createCrew(t, s, 5)

	got, err := s.crews.GetForUpdate(context.Background(), c.ID())

	assert.Error(t, err)
	assert.Nil(t, got)
}

func testCrewSaveWritesMemberCount(t *testing.T, s crewStore) {
	ctx := context.Background()
	c := createCrew(t, s, 5)
	for range 3 {
		_, err := c.Join(newUserID(), now())
		require.NoError(t, err)
	}
	require.NoError(t, s.crews.Save(ctx, c))

	got, err := s.crews.Get(ctx, c.ID())
	require.NoError(t, err)
	assertSameCrew(t, c, got)

	got.Leave()
	require.NoError(t, s.crews.Save(ctx, got))
	got, err = s.crews.Get(ctx, c.ID())
	require.NoError(t, err)
	assert.Equal(t, 2, got.CurrentMembers())
}

// testCrewConcurrentGetForUpdateSerialises runs the join transaction from many goroutines on one
// crew: only if each sees the previous one's committed count do exactly maxMembers succeed.
func testCrewConcurrentGetForUpdateSerialises(t *testing.T, s crewStore) {
	const joiners, capacity = 50, 30
	ctx := context.Background()
	c := createCrew(t, s, capacity)

	errs := make([]error, joiners)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range joiners {
		wg.Go(func() {
			<-start
			errs[i] = joinInTx(ctx, s, c.ID(), newUserID())
		})
	}
	close(start)
	wg.Wait()

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
	assert.Equal(t, capacity, joined)
	assert.Equal(t, joiners-capacity, full)

	stored, err := s.crews.Get(ctx, c.ID())
	require.NoError(t, err)
	assert.Equal(t, capacity, stored.CurrentMembers())
	count, err := s.members.Count(ctx, c.ID())
	require.NoError(t, err)
	assert.Equal(t, capacity, count)
}

func testMemberAddThenExistsAndCount(t *testing.T, s crewStore) {
	ctx := context.Background()
	c, other := createCrew(t, s, 10), createCrew(t, s, 10)
	userID := newUserID()

	exists, err := s.members.Exists(ctx, c.ID(), userID)
	require.NoError(t, err)
	assert.False(t, exists)

	require.NoError(t, s.members.Add(ctx, crew.Member{CrewID: c.ID(), UserID: userID, JoinedAt: now()}))
	require.NoError(t, s.members.Add(ctx, crew.Member{CrewID: c.ID(), UserID: newUserID(), JoinedAt: now()}))
	// Uniqueness is per pair: the same user may join another crew.
	require.NoError(t, s.members.Add(ctx, crew.Member{CrewID: other.ID(), UserID: userID, JoinedAt: now()}))

	exists, err = s.members.Exists(ctx, c.ID(), userID)
	require.NoError(t, err)
	assert.True(t, exists)
	count, err := s.members.Count(ctx, c.ID())
	require.NoError(t, err)
	assert.Equal(t, 2, count)
	count, err = s.members.Count(ctx, other.ID())
	require.NoError(t, err)
	assert.Equal(t, 1, count)
}

func testMemberAddOfExistingPairIsAlreadyMember(t *testing.T, s crewStore) {
	ctx := context.Background()
	c := createCrew(t, s, 10)
	m := crew.Member{CrewID: c.ID(), UserID: newUserID(), JoinedAt: now()}
	require.NoError(t, s.members.Add(ctx, m))

	m.JoinedAt = now().Add(time.Second)
	err := s.members.Add(ctx, m)

	assert.ErrorIs(t, err, crew.ErrAlreadyMember)
	count, err := s.members.Count(ctx, c.ID())
	require.NoError(t, err)
	assert.Equal(t, 1, count)
}

// testMemberConcurrentAddsOfOnePair: transactions racing to insert one pair all reach the
// unique key; the first to commit wins and every other gets crew.ErrAlreadyMember.
func testMemberConcurrentAddsOfOnePair(t *testing.T, s crewStore) {
	const adders = 20
	ctx := context.Background()
	c := createCrew(t, s, 10)
	m := crew.Member{CrewID: c.ID(), UserID: newUserID(), JoinedAt: now()}

	errs := make([]error, adders)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range adders {
		wg.Go(func() {
			<-start
			errs[i] = s.tx.InTx(ctx, func(ctx context.Context) error { return s.members.Add(ctx, m) })
		})
	}
	close(start)
	wg.Wait()

	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		assert.ErrorIs(t, err, crew.ErrAlreadyMember)
	}
	assert.Equal(t, 1, won)
	count, err := s.members.Count(ctx, c.ID())
	require.NoError(t, err)
	assert.Equal(t, 1, count)
}

func testMemberRemove(t *testing.T, s crewStore) {
	ctx := context.Background()
	c := createCrew(t, s, 10)
	stays, leaves := newUserID(), newUserID()
	for _, userID := range []string{stays, leaves} {
		require.NoError(t, s.members.Add(ctx, crew.Member{CrewID: c.ID(), UserID: userID, JoinedAt: now()}))
	}

	require.NoError(t, s.members.Remove(ctx, c.ID(), leaves))

	exists, err := s.members.Exists(ctx, c.ID(), leaves)
	require.NoError(t, err)
	assert.False(t, exists)
	exists, err = s.members.Exists(ctx, c.ID(), stays)
	require.NoError(t, err)
	assert.True(t, exists)
	count, err := s.members.Count(ctx, c.ID())
	require.NoError(t, err)
	assert.Equal(t, 1, count)

	assert.ErrorIs(t, s.members.Remove(ctx, c.ID(), leaves), crew.ErrNotMember, "removed twice")
	assert.ErrorIs(t, s.members.Remove(ctx, c.ID(), newUserID()), crew.ErrNotMember, "never joined")
	assert.ErrorIs(t, s.members.Remove(ctx, newCrewID(), stays), crew.ErrNotMember, "unknown crew")

	// A removed member may join again.
	require.NoError(t, s.members.Add(ctx, crew.Member{CrewID: c.ID(), UserID: leaves, JoinedAt: now()}))
}

// testMemberListPages stores members out of order, several sharing a join time, and reads them
// back page by page: the pages concatenate to the (JoinedAt, UserID) order, times intact.
func testMemberListPages(t *testing.T, s crewStore) {
	ctx := context.Background()
	c, other := createCrew(t, s, 100), createCrew(t, s, 100)
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
		require.NoError(t, s.members.Add(ctx, want[i]))
	}
	require.NoError(t, s.members.Add(ctx, crew.Member{CrewID: other.ID(), UserID: "user-a", JoinedAt: at(1)}))

	const limit = 3
	var got []crew.Member
	var after *ports.MemberCursor
	for range len(want) {
		page, err := s.members.List(ctx, c.ID(), after, limit)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), limit)
		got = append(got, page...)
		if len(page) < limit {
			break
		}
		last := page[len(page)-1]
		after = &ports.MemberCursor{JoinedAt: last.JoinedAt, UserID: last.UserID}
	}
	assert.Equal(t, want, got)

	all, err := s.members.List(ctx, c.ID(), nil, 100)
	require.NoError(t, err)
	assert.Equal(t, want, all)

	end := want[len(want)-1]
	rest, err := s.members.List(ctx, c.ID(), &ports.MemberCursor{JoinedAt: end.JoinedAt, UserID: end.UserID}, limit)
	require.NoError(t, err)
	assert.Empty(t, rest)
}

func testMemberListOfEmptyCrew(t *testing.T, s crewStore) {
	c := createCrew(t, s, 10)

	page, err := s.members.List(context.Background(), c.ID(), nil, 10)

	require.NoError(t, err)
	assert.Empty(t, page)
}
