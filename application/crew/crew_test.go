package crew_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/memory/memorytest"
	"github.com/rushgate/rushgate/adapters/system"
	appcrew "github.com/rushgate/rushgate/application/crew"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/guard/guardtest"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

// fixture is one backend on memory (memorytest.Env) shared by every service instance a test
// starts (newService), as several servers share Postgres and Redis.
type fixture struct {
	*memorytest.Env
	members ports.CrewMemberRepository // what the services use
	table   *memory.CrewMemberRepository
	queues  *guardtest.Queues // reports joins queueing on any of the fixture's instances
	svc     *appcrew.Service  // the first instance
	// batches counts the transactions the guards ran batches in.
	batches atomic.Int32
}

// countingTx counts the transactions it runs.
type countingTx struct {
	ports.TxRunner
	count *atomic.Int32
}

func (c countingTx) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	c.count.Add(1)
	return c.TxRunner.InTx(ctx, fn)
}

// setup is what the options change: the backend's, and the member repository the services use.
type setup struct {
	env     []memorytest.Option
	members func(*memory.CrewMemberRepository) ports.CrewMemberRepository
}

type option func(*setup)

// withFakeTime runs the fixture on a clock that moves only when told to or when a request backs
// off (memory.Sleeper), and on a memory locker whose lock a test can hold (fixture.hold).
func withFakeTime() option {
	return func(s *setup) {
		clock := memory.NewClock(memorytest.Start)
		s.env = append(s.env, memorytest.WithClock(clock, memory.NewSleeper(clock)))
	}
}

// withParkedHeads is fake time in which a head waiting for the lock never gives up: it moves only
// when the lock is released. Tests queue joins behind a held lock to serve them in one batch.
func withParkedHeads() option {
	return func(s *setup) {
		s.env = append(s.env, memorytest.WithClock(memory.NewClock(memorytest.Start), guardtest.Parked{}))
	}
}

func withLocker(l ports.Locker) option {
	return func(s *setup) {
		s.env = append(s.env, memorytest.WithLocker(func(ports.Locker) ports.Locker { return l }))
	}
}

func withStore(wrap func(ports.IdempotencyStore) ports.IdempotencyStore) option {
	return func(s *setup) { s.env = append(s.env, memorytest.WithIdempotency(wrap)) }
}

func withMembers(wrap func(*memory.CrewMemberRepository) ports.CrewMemberRepository) option {
	return func(s *setup) { s.members = wrap }
}

// newFixture runs in real time unless an option says otherwise.
func newFixture(t *testing.T, opts ...option) *fixture {
	t.Helper()
	f := &fixture{queues: guardtest.NewQueues()}
	s := setup{env: []memorytest.Option{
		memorytest.WithClock(system.Clock{}, system.Sleeper{}),
		// Short backoff keeps contention tests fast; the schedule itself is the guard's test.
		memorytest.WithGuard(guard.Config{BaseDelay: time.Millisecond, MaxRetries: 10}, guard.WithObserver(f.queues)),
		memorytest.WithGuardTx(func(tx ports.TxRunner) ports.TxRunner { return countingTx{tx, &f.batches} }),
	}}
	for _, o := range opts {
		o(&s)
	}
	f.Env = memorytest.New(s.env...)
	f.table = f.Stores.CrewMembers.(*memory.CrewMemberRepository)
	f.members = f.table
	if s.members != nil {
		f.members = s.members(f.table)
	}
	f.svc = f.newService()
	return f
}

// newService starts another instance: its own guard, lane and full hints, on the shared ports.
func (f *fixture) newService() *appcrew.Service {
	return appcrew.NewService(appcrew.Deps{
		Tx: f.Stores.Tx, Crews: f.Stores.Crews, Members: f.members, Guard: f.NewGuard(),
		Clock: f.Clock, IDs: system.UUIDs{},
	}, appcrew.Config{})
}

// hold takes the crew's lock as another instance would, for an hour.
func (f *fixture) hold(t *testing.T, crewID string) ports.Lock {
	t.Helper()
	// A join is answered before its lock is released, so the lock of a join just answered may
	// still be held for a moment (longer on a busy machine): wait for it, not for anything else.
	var lock ports.Lock
	testkit.Eventually(t, 10*time.Second, "the crew's lock", func() error {
		var err error
		lock, err = f.Coord.Locker.TryAcquire(context.Background(), "crew:"+crewID, time.Hour)
		if err != nil && !errors.Is(err, ports.ErrLockNotAcquired) {
			t.Fatal(err)
		}
		return err
	})
	return lock
}

func mustCreate(t *testing.T, svc *appcrew.Service, max int) appcrew.View {
	t.Helper()
	v, err := svc.Create(context.Background(), appcrew.CreateCommand{Name: "runners", MaxMembers: max})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func join(svc *appcrew.Service, crewID, userID string) (guard.Result[appcrew.JoinResult], error) {
	return joinWithKey(context.Background(), svc, crewID, userID, "join-"+userID)
}

func joinWithKey(ctx context.Context, svc *appcrew.Service, crewID, userID, key string) (guard.Result[appcrew.JoinResult], error) {
	return svc.Join(ctx, appcrew.JoinCommand{CrewID: crewID, UserID: userID, IdempotencyKey: key})
}

// code names a join's answer: the outcome, or the error's code.
func code(res guard.Result[appcrew.JoinResult], err error) string {
	if err == nil {
		return string(res.Outcome)
	}
	if de, ok := domain.AsError(err); ok {
		return de.Code
	}
	return err.Error()
}

// assertSeated checks the crew's invariant: currentMembers == count(members) == want, no user
// twice.
func assertSeated(t *testing.T, f *fixture, crewID string, want int) {
	t.Helper()
	ctx := context.Background()
	got, err := f.svc.Get(ctx, crewID)
	if err != nil {
		t.Fatal(err)
	}
	count, _ := f.table.Count(ctx, crewID)
	members, _ := f.table.List(ctx, crewID, nil, domain.MaxPageLimit)
	users := map[string]bool{}
	for _, m := range members {
		if users[m.UserID] {
			t.Fatalf("user %s seated twice", m.UserID)
		}
		users[m.UserID] = true
	}
	if got.CurrentMembers != want || count != want || len(members) != want {
		t.Fatalf("currentMembers %d, count %d, listed %d, want %d", got.CurrentMembers, count, len(members), want)
	}
}

func TestCreate_ValidatesInput(t *testing.T) {
	f := newFixture(t)
	cases := []appcrew.CreateCommand{{Name: "", MaxMembers: 10}, {Name: "a", MaxMembers: 0}, {Name: "a", MaxMembers: 100001}}
	for _, cmd := range cases {
		if _, err := f.svc.Create(context.Background(), cmd); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("%+v: err %v", cmd, err)
		}
	}
}

func TestJoin_SeatsTheUserAndCounts(t *testing.T) {
	f := newFixture(t)
	c := mustCreate(t, f.svc, 2)
	res, err := join(f.svc, c.ID, "u1")
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != guard.OutcomeCreated || res.Replayed || res.Value.CurrentMembers != 1 || res.Value.MaxMembers != 2 || res.Value.UserID != "u1" || res.Value.CrewID != c.ID {
		t.Fatalf("%+v", res)
	}
	assertSeated(t, f, c.ID, 1)
}

func TestJoin_RejectsWhenFull(t *testing.T) {
	f := newFixture(t)
	c := mustCreate(t, f.svc, 1)
	if _, err := join(f.svc, c.ID, "u1"); err != nil {
		t.Fatal(err)
	}
	if _, err := join(f.svc, c.ID, "u2"); !errors.Is(err, crew.ErrFull) {
		t.Fatalf("err %v", err)
	}
	assertSeated(t, f, c.ID, 1)
}

func TestJoin_ReplaysTheSameKey(t *testing.T) {
	f := newFixture(t)
	c := mustCreate(t, f.svc, 5)
	first, _ := join(f.svc, c.ID, "u1")
	again, err := join(f.svc, c.ID, "u1")
	if err != nil || !again.Replayed || again.Outcome != guard.OutcomeCreated || again.Value != first.Value {
		t.Fatalf("%+v, %v", again, err)
	}
	assertSeated(t, f, c.ID, 1)
}

func TestJoin_UnknownCrewAndBadInput(t *testing.T) {
	f := newFixture(t)
	if _, err := join(f.svc, "0190a0b0-0000-7000-8000-000000000000", "u1"); !errors.Is(err, crew.ErrNotFound) {
		t.Fatalf("unknown crew: %v", err)
	}
	for _, id := range []string{"", "not-a-uuid", "0190A0B0-0000-7000-8000-000000000000"} {
		if _, err := join(f.svc, id, "u1"); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("crew id %q: %v", id, err)
		}
	}
	c := mustCreate(t, f.svc, 1)
	if _, err := joinWithKey(context.Background(), f.svc, c.ID, "u1", ""); !errors.Is(err, guard.ErrKeyRequired) {
		t.Errorf("no key: %v", err)
	}
}

// A member asking again with a new key is not replayed: they hear ALREADY_MEMBER, whichever
// instance answers, and also once the crew has filled: the membership is checked before the
// capacity, under the row lock.
func TestJoin_AMemberRejoiningWithANewKeyHearsAlreadyMember(t *testing.T) {
	cases := map[string]struct {
		max      int
		instance func(f *fixture) *appcrew.Service
	}{
		"crew with seats":                         {4, func(f *fixture) *appcrew.Service { return f.svc }},
		"full crew, this instance saw it full":    {2, func(f *fixture) *appcrew.Service { return f.svc }},
		"full crew, an instance without the hint": {2, func(f *fixture) *appcrew.Service { return f.newService() }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			c := mustCreate(t, f.svc, tc.max)
			for _, u := range []string{"u1", "u2"} {
				if _, err := join(f.svc, c.ID, u); err != nil {
					t.Fatal(err)
				}
			}
			// Seen full (or not) by the first instance under the lock.
			if _, err := join(f.svc, c.ID, "u3"); tc.max == 2 && !errors.Is(err, crew.ErrFull) {
				t.Fatalf("u3: %v", err)
			}
			_, err := joinWithKey(context.Background(), tc.instance(f), c.ID, "u1", "another-key")
			if !errors.Is(err, crew.ErrAlreadyMember) {
				t.Fatalf("err %v", err)
			}
			assertSeated(t, f, c.ID, min(tc.max, 3))
		})
	}
}

func TestJoin_TheSameUserTwiceInOneBatchIsSeatedOnceInOneTransaction(t *testing.T) {
	f := newFixture(t, withParkedHeads())
	c := mustCreate(t, f.svc, 5)
	outcomes := serveQueued(t, f, c.ID, []queuedJoin{{"u1", "k1"}, {"u1", "k2"}, {"u2", "k3"}})
	if fmt.Sprint(outcomes) != "[created ALREADY_MEMBER created]" {
		t.Fatalf("outcomes %v", outcomes)
	}
	if n := f.batches.Load(); n != 1 {
		t.Fatalf("%d transactions, want the batch seated in one", n)
	}
	assertSeated(t, f, c.ID, 2)
}

func TestJoin_ABatchPastCapacitySeatsExactlyCapacityInArrivalOrder(t *testing.T) {
	f := newFixture(t, withParkedHeads())
	c := mustCreate(t, f.svc, 3)
	var joins []queuedJoin
	for i := range 5 {
		joins = append(joins, queuedJoin{fmt.Sprintf("u%d", i), fmt.Sprintf("k%d", i)})
	}
	outcomes := serveQueued(t, f, c.ID, joins)
	if fmt.Sprint(outcomes) != "[created created created CREW_FULL CREW_FULL]" {
		t.Fatalf("outcomes %v", outcomes)
	}
	if n := f.batches.Load(); n != 1 {
		t.Fatalf("%d transactions, want the batch served in one", n)
	}
	assertSeated(t, f, c.ID, 3)
	page, _ := f.svc.ListMembers(context.Background(), c.ID, 10, "")
	for i, m := range page.Items {
		if m.UserID != fmt.Sprintf("u%d", i) {
			t.Fatalf("members %+v", page.Items)
		}
	}
}

func TestJoin_OnceSeenFullAnswersCrewFullWithoutQueueingForTheLock(t *testing.T) {
	f := newFixture(t, withFakeTime())
	c := mustCreate(t, f.svc, 1)
	if _, err := join(f.svc, c.ID, "u1"); err != nil {
		t.Fatal(err)
	}
	if _, err := join(f.svc, c.ID, "u2"); !errors.Is(err, crew.ErrFull) { // seen full under the lock
		t.Fatalf("u2: %v", err)
	}
	// Another instance holds the lock for good: a join that queued for it would back off and
	// end TOO_MANY_REQUESTS.
	holder := f.hold(t, c.ID)
	if _, err := join(f.svc, c.ID, "u3"); !errors.Is(err, crew.ErrFull) {
		t.Fatalf("u3: %v", err)
	}
	if sleeps := f.Sleeper.(*memory.Sleeper).Waits(); len(sleeps) != 0 {
		t.Fatalf("the rejected join waited for the lock: %v", sleeps)
	}

	// A leave through this instance forgets the hint at once.
	if err := f.svc.Leave(context.Background(), appcrew.LeaveCommand{CrewID: c.ID, UserID: "u1"}); err != nil {
		t.Fatal(err)
	}
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res, err := join(f.svc, c.ID, "u3"); err != nil || res.Value.CurrentMembers != 1 {
		t.Fatalf("after the leave: %+v, %v", res, err)
	}
	assertSeated(t, f, c.ID, 1)
}

// blindMembers misses every membership, as a read racing a concurrent insert would: only the
// UNIQUE index behind Add can tell.
type blindMembers struct{ *memory.CrewMemberRepository }

func (blindMembers) Existing(context.Context, string, []string) (map[string]bool, error) {
	return map[string]bool{}, nil
}

func TestJoin_TheUniqueIndexDecidesARaceTheMembershipReadMissed(t *testing.T) {
	blind := withMembers(func(r *memory.CrewMemberRepository) ports.CrewMemberRepository { return blindMembers{r} })

	t.Run("alone", func(t *testing.T) {
		f := newFixture(t, blind)
		c := mustCreate(t, f.svc, 5)
		if _, err := join(f.svc, c.ID, "u1"); err != nil {
			t.Fatal(err)
		}
		if _, err := joinWithKey(context.Background(), f.svc, c.ID, "u1", "another-key"); !errors.Is(err, crew.ErrAlreadyMember) {
			t.Fatalf("err %v", err)
		}
		assertSeated(t, f, c.ID, 1)
	})

	t.Run("in a batch with a newcomer", func(t *testing.T) {
		f := newFixture(t, blind, withParkedHeads())
		c := mustCreate(t, f.svc, 5)
		if _, err := join(f.svc, c.ID, "u1"); err != nil {
			t.Fatal(err)
		}
		outcomes := serveQueued(t, f, c.ID, []queuedJoin{{"u1", "another-key"}, {"u2", "k2"}})
		if fmt.Sprint(outcomes) != "[ALREADY_MEMBER created]" {
			t.Fatalf("outcomes %v", outcomes)
		}
		assertSeated(t, f, c.ID, 2)
	})
}

// grantingLocker grants every TryAcquire, as a lock whose TTL ran out mid-batch lets the next
// holder in: only the database's row lock and constraints keep the crew's invariant.
type grantingLocker struct{}

func (grantingLocker) TryAcquire(context.Context, string, time.Duration) (ports.Lock, error) {
	return expiredLock{}, nil
}

func (grantingLocker) Released(string) (<-chan struct{}, func()) { return nil, func() {} }

type expiredLock struct{}

func (expiredLock) Release(context.Context) error { return ports.ErrLockNotHeld }

func TestJoin_AHolderWhoseLockExpiresMidBatchNeverOverfills(t *testing.T) {
	f := newFixture(t, withLocker(grantingLocker{}))
	instances := []*appcrew.Service{f.svc, f.newService()}
	c := mustCreate(t, f.svc, 50)
	outcomes := stampede(instances, c.ID, 200)
	if outcomes["created"] != 50 || outcomes["CREW_FULL"] != 150 {
		t.Fatalf("outcomes %v", outcomes)
	}
	assertSeated(t, f, c.ID, 50)
}

func TestJoin_StampedeSeatsExactlyCapacity(t *testing.T) {
	f := newFixture(t)
	c := mustCreate(t, f.svc, 100)
	outcomes := stampede([]*appcrew.Service{f.svc}, c.ID, 300)
	if outcomes["created"] != 100 || outcomes["CREW_FULL"] != 200 {
		t.Fatalf("outcomes %v", outcomes)
	}
	assertSeated(t, f, c.ID, 100)
}

// stampede sends n joins of distinct users at once, spread over the instances, and counts their
// answers by code.
func stampede(instances []*appcrew.Service, crewID string, n int) map[string]int {
	var mu sync.Mutex
	outcomes := map[string]int{}
	testkit.StartTogether(n, func(i int) {
		c := code(join(instances[i%len(instances)], crewID, fmt.Sprintf("u%d", i)))
		mu.Lock()
		outcomes[c]++
		mu.Unlock()
	})
	return outcomes
}

// The membership and the join's marker commit together, so a retry whose record was never
// completed is answered from the marker instead of ALREADY_MEMBER.
func TestJoin_ARetryAfterALostCompleteIsReplayedFromTheMarker(t *testing.T) {
	var store *guardtest.LostCompletes
	f := newFixture(t, withFakeTime(), withStore(func(inner ports.IdempotencyStore) ports.IdempotencyStore {
		store = &guardtest.LostCompletes{IdempotencyStore: inner}
		return store
	}))
	c := mustCreate(t, f.svc, 5)

	first, err := join(f.svc, c.ID, "u1")
	if err != nil || first.Outcome != guard.OutcomeCreated {
		t.Fatalf("first: %+v, %v", first, err)
	}
	// The guard retries a lost Complete in the background, so more than one may be lost by now.
	if store.Lost() < 1 {
		t.Fatal("the Complete was not lost")
	}
	f.FakeClock.Advance(31 * time.Second) // the lease of the never-completed record ends
	again, err := join(f.svc, c.ID, "u1")
	if err != nil || !again.Replayed || again.Outcome != guard.OutcomeCreated || again.Value != first.Value {
		t.Fatalf("retry: %+v, %v", again, err)
	}
	assertSeated(t, f, c.ID, 1)
}

func TestLeave_FreesASeat(t *testing.T) {
	f := newFixture(t)
	c := mustCreate(t, f.svc, 1)
	if _, err := join(f.svc, c.ID, "u1"); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Leave(context.Background(), appcrew.LeaveCommand{CrewID: c.ID, UserID: "u1"}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Leave(context.Background(), appcrew.LeaveCommand{CrewID: c.ID, UserID: "u1"}); !errors.Is(err, crew.ErrNotMember) {
		t.Fatalf("second leave: %v", err)
	}
	if _, err := join(f.svc, c.ID, "u2"); err != nil {
		t.Fatalf("seat not freed: %v", err)
	}
	assertSeated(t, f, c.ID, 1)
}

func TestListMembers_PagesInJoinOrder(t *testing.T) {
	f := newFixture(t)
	c := mustCreate(t, f.svc, 10)
	for i := range 5 {
		if _, err := join(f.svc, c.ID, fmt.Sprintf("u%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		page, err := f.svc.ListMembers(context.Background(), c.ID, 2, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Items {
			seen = append(seen, m.UserID)
		}
		if page.NextCursor == nil {
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		cursor = *page.NextCursor
	}
	if fmt.Sprint(seen) != "[u0 u1 u2 u3 u4]" {
		t.Fatalf("members %v", seen)
	}
	for _, bad := range []struct {
		limit  int
		cursor string
	}{{-1, ""}, {501, ""}, {10, "garbage!"}} {
		if _, err := f.svc.ListMembers(context.Background(), c.ID, bad.limit, bad.cursor); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
