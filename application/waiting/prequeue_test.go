package waiting_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/application/waiting"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/draw"
	domainwaiting "github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

var saleDay = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

// prequeued creates a pull event whose pre-queue opens after opensIn, placed in order, and
// enters users into it.
func prequeued(t *testing.T, opensIn time.Duration, order string, users []string) (rooms, *memory.Clock, waiting.EventView) {
	t.Helper()
	ctx := context.Background()
	clock := memory.NewClock(saleDay)
	r := newRooms(clock)
	event, err := r.svc.CreateEvent(ctx, waiting.CreateEventCommand{Name: "sale", Seats: 10, Slots: 2, Mode: "pull",
		OpensAt: saleDay.Add(opensIn).Format(time.RFC3339), Prequeue: order})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		v, created, err := r.svc.Enter(ctx, event.ID, u)
		if err != nil {
			t.Fatal(err)
		}
		if !created || v.Status != waiting.StatusPrequeue || v.Prequeue == nil ||
			!v.Prequeue.OpensAt.Equal(*event.OpensAt) || v.Prequeue.SeedHash != event.SeedHash {
			t.Fatalf("entering the pre-queue answered %+v, created %v", v, created)
		}
	}
	return r, clock, event
}

// saleOpeningInAMinute creates a pull event of 10 seats and 2 slots on svc whose pre-queue opens
// a minute after saleDay.
func saleOpeningInAMinute(t *testing.T, svc *waiting.Service) waiting.EventView {
	t.Helper()
	event, err := svc.CreateEvent(context.Background(), waiting.CreateEventCommand{Name: "sale", Seats: 10, Slots: 2,
		Mode: "pull", OpensAt: saleDay.Add(time.Minute).Format(time.RFC3339)})
	if err != nil {
		t.Fatal(err)
	}
	return event
}

func userNames(n int, prefix string) []string {
	users := make([]string, n)
	for i := range users {
		users[i] = fmt.Sprint(prefix, i)
	}
	return users
}

// ranks are the users' ranks, by status.
func ranks(t *testing.T, svc *waiting.Service, eventID string, users []string) []string {
	t.Helper()
	line := make([]string, len(users))
	for _, u := range users {
		v, err := svc.Status(context.Background(), eventID, u)
		if err != nil {
			t.Fatal(err)
		}
		if v.Status == waiting.StatusPrequeue || v.Rank >= len(users) || line[v.Rank] != "" {
			t.Fatalf("%s: status %+v", u, v)
		}
		line[v.Rank] = u
	}
	return line
}

func TestPrequeue_NobodyHasARankOrIsAdmittedBeforeOpening(t *testing.T) {
	ctx := context.Background()
	r, clock, event := prequeued(t, time.Minute, "", userNames(5, "early"))
	if event.Prequeue != "shuffle" || event.SeedHash == "" {
		t.Fatalf("a pre-queue without an order is a shuffle with a commitment: %+v", event)
	}
	again, created, err := r.svc.Enter(ctx, event.ID, "early0")
	if err != nil || created || again.Status != waiting.StatusPrequeue {
		t.Fatalf("a repeated entry answered %+v, created %v, %v", again, created, err)
	}
	_, _, err = r.svc.Claim(ctx, event.ID, "early0")
	var notReady *domain.Error
	if !errors.As(err, &notReady) || notReady.Code != "NOT_READY" || notReady.Details["rank"] != nil {
		t.Fatalf("a claim in the pre-queue answered %v", err)
	}
	clock.Advance(59 * time.Second)
	if err := r.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := r.svc.Status(ctx, event.ID, "early4")
	if err != nil || v.Status != waiting.StatusPrequeue {
		t.Fatalf("before opensAt the status is %+v, %v", v, err)
	}
	public, err := r.svc.Event(ctx, event.ID)
	if err != nil {
		t.Fatal(err)
	}
	if public.Seed != "" || public.SeedHash != event.SeedHash || public.SoldOut {
		t.Fatalf("before opening GET /events answered %+v", public)
	}
	if _, err := r.svc.Status(ctx, event.ID, "stranger"); !errors.Is(err, domainwaiting.ErrNotInQueue) {
		t.Fatalf("a user outside the pre-queue: %v", err)
	}
	// The operators' queue view counts the pre-queued users as waiting: they are the line.
	if q, err := r.svc.Queue(ctx, event.ID); err != nil || q.Waiting != 5 || q.Prequeued != 5 || q.Admitted != 0 {
		t.Fatalf("the queue view before opening: %+v, %v; want 5 waiting, all pre-queued", q, err)
	}
}

func TestPrequeue_ShuffleAtOpensAtPlacesTheDrawOrderAheadOfLaterArrivals(t *testing.T) {
	ctx := context.Background()
	early := userNames(40, "early")
	r, clock, event := prequeued(t, time.Minute, "shuffle", early)
	clock.Advance(time.Minute)
	late := []string{"late-b", "late-a"}
	for _, u := range late {
		v, _, err := r.svc.Enter(ctx, event.ID, u)
		if err != nil || v.Status != waiting.StatusPrequeue {
			t.Fatalf("a later arrival before the placing: %+v, %v", v, err)
		}
	}
	if err := r.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	public, err := r.svc.Event(ctx, event.ID)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := draw.ParseSeed(public.Seed)
	if err != nil || !seed.Matches(event.SeedHash) {
		t.Fatalf("the published seed %q does not match the commitment: %v", public.Seed, err)
	}
	want := make([]string, 0, len(early)+len(late))
	for _, e := range draw.Order(seed, early) {
		want = append(want, e.UserID)
	}
	want = append(want, late...)
	if got := ranks(t, r.svc, event.ID, want); !slices.Equal(got, want) {
		t.Fatalf("line %v, want the draw order then FIFO %v", got, want)
	}
	if slices.Equal(want[:len(early)], early) {
		t.Fatal("the draw order is the arrival order: the test cannot tell a shuffle")
	}
	if _, _, err := r.svc.Claim(ctx, event.ID, want[0]); err != nil {
		t.Fatalf("the first drawn user cannot claim: %v", err)
	}
	if _, _, err := r.svc.Claim(ctx, event.ID, want[2]); err == nil {
		t.Fatal("the third drawn user claimed with two slots")
	}
}

func TestPrequeue_FIFOPlacesTheArrivalOrder(t *testing.T) {
	ctx := context.Background()
	early := userNames(12, "early")
	r, clock, event := prequeued(t, time.Minute, "fifo", early)
	clock.Advance(time.Minute)
	if _, _, err := r.svc.Enter(ctx, event.ID, "late"); err != nil {
		t.Fatal(err)
	}
	if err := r.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(early), "late")
	if got := ranks(t, r.svc, event.ID, want); !slices.Equal(got, want) {
		t.Fatalf("line %v, want %v", got, want)
	}
}

func TestPrequeue_IdleRuleDropsPrequeuedPullUsers(t *testing.T) {
	ctx := context.Background()
	r, clock, event := prequeued(t, time.Hour, "shuffle", []string{"gone", "polling"})
	clock.Advance(waiting.DefaultIdleTimeout / 2)
	if _, err := r.svc.Status(ctx, event.ID, "polling"); err != nil {
		t.Fatal(err)
	}
	// Dropped once the idle timeout and a sign-of-life step have passed since the last poll.
	clock.Advance(waiting.DefaultIdleTimeout/2 + waiting.DefaultIdleTimeout/8 + time.Second)
	if err := r.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.Status(ctx, event.ID, "gone"); !errors.Is(err, domainwaiting.ErrNotInQueue) {
		t.Fatalf("an idle pre-queued user stays: %v", err)
	}
	if v, err := r.svc.Status(ctx, event.ID, "polling"); err != nil || v.Status != waiting.StatusPrequeue {
		t.Fatalf("a polling pre-queued user: %+v, %v", v, err)
	}
}

func TestCreateEvent_RefusesABadPrequeue(t *testing.T) {
	svc := newRooms(memory.NewClock(saleDay)).svc
	future := saleDay.Add(time.Hour).Format(time.RFC3339)
	for name, cmd := range map[string]waiting.CreateEventCommand{
		"malformed opensAt":     {OpensAt: "tomorrow"},
		"opensAt in the past":   {OpensAt: saleDay.Add(-time.Second).Format(time.RFC3339)},
		"opensAt now":           {OpensAt: saleDay.Format(time.RFC3339)},
		"unknown order":         {OpensAt: future, Prequeue: "lottery"},
		"order without opening": {Prequeue: "fifo"},
	} {
		cmd.Name, cmd.Seats, cmd.Mode = "bad", 3, "pull"
		if _, err := svc.CreateEvent(context.Background(), cmd); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("%s: %v, want a validation error", name, err)
		}
	}
}

func TestPrequeue_PushStreamsAreToldAndNobodyIsPromotedBeforeOpening(t *testing.T) {
	ctx := context.Background()
	clock := memory.NewClock(saleDay)
	r := newRooms(clock)
	event, err := r.svc.CreateEvent(ctx, waiting.CreateEventCommand{Name: "push sale", Seats: 5, Slots: 2, Mode: "push",
		OpensAt: saleDay.Add(time.Minute).Format(time.RFC3339)})
	if err != nil {
		t.Fatal(err)
	}
	broker := waiting.NewBroker(r.broker, "broker-1", waiting.BrokerConfig{})
	dispatcher := waiting.NewDispatcher(r.dispatcher, "dispatcher-1", waiting.DispatcherConfig{})
	streams := make([]*stream, 3)
	for i := range streams {
		streams[i] = join(t, broker, event.ID, fmt.Sprint("u", i), false)
		if streams[i].prequeue.Load() != 1 {
			t.Fatal("joining a pre-queue sent no prequeue event")
		}
	}
	if err := dispatcher.Promote(ctx, event.ID); err != nil {
		t.Fatal(err)
	}
	broker.Tick(ctx)
	for _, s := range streams {
		if s.admissions() != 0 || s.prequeue.Load() != 2 {
			t.Fatalf("before opening: %d admissions, %d prequeue events", s.admissions(), s.prequeue.Load())
		}
	}
	for range 12 { // the broker's heartbeat keeps its users
		clock.Advance(5 * time.Second)
		broker.Tick(ctx)
	}
	if err := r.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dispatcher.Promote(ctx, event.ID); err != nil {
		t.Fatal(err)
	}
	stats, err := r.svc.Queue(ctx, event.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Admitted != 2 || stats.Waiting != 1 {
		t.Fatalf("after opening: %+v, want the two slots taken and one waiting", stats)
	}
}

// heldSleeper is a ports.Sleeper whose waits the test ends: each tells asked its duration and
// returns, the clock moved on by it, once the test sends on release, or with the context's error
// once that is done.
type heldSleeper struct {
	clock   *memory.Clock
	asked   chan time.Duration
	release chan struct{}
}

func newHeldSleeper(clock *memory.Clock) *heldSleeper {
	return &heldSleeper{clock: clock, asked: make(chan time.Duration, 16), release: make(chan struct{})}
}

func (s *heldSleeper) Sleep(ctx context.Context, d time.Duration) error {
	s.asked <- d
	select {
	case <-s.release:
		s.clock.Advance(d)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestPrequeue_OpensAtOpensAtWithoutWaitingForAPass(t *testing.T) {
	ctx := context.Background()
	clock := memory.NewClock(saleDay)
	sleeper := newHeldSleeper(clock)
	r := newRoomsWaitingOn(clock, sleeper)
	defer r.svc.Close()
	event := saleOpeningInAMinute(t, r.svc)
	if d := <-sleeper.asked; d != time.Minute {
		t.Fatalf("the opening timer waits %v, want the minute until opensAt", d)
	}
	early := userNames(30, "early")
	for _, u := range early {
		if v, _, err := r.svc.Enter(ctx, event.ID, u); err != nil || v.Status != waiting.StatusPrequeue {
			t.Fatalf("entering the pre-queue: %+v, %v", v, err)
		}
	}
	sleeper.release <- struct{}{} // opensAt: no reconciliation pass runs in this test
	var public waiting.PublicEventView
	testkit.Eventually(t, 10*time.Second, "the pre-queue opened by its timer", func() error {
		var err error
		public, err = r.svc.Event(ctx, event.ID)
		if err == nil && public.Seed == "" {
			err = errors.New("not open")
		}
		return err
	})
	seed, err := draw.ParseSeed(public.Seed)
	if err != nil {
		t.Fatal(err)
	}
	want := draw.OrderUsers(seed, early)
	if got := ranks(t, r.svc, event.ID, want); !slices.Equal(got, want) {
		t.Fatalf("line %v, want the draw order %v", got, want)
	}
}

// stalledOnce is a waiting room whose first read of a pre-queue fails as a store that did not
// answer in time does.
type stalledOnce struct {
	ports.WaitingRoom
	stalled atomic.Bool
}

func (r *stalledOnce) Prequeued(ctx context.Context, eventID string) ([]string, bool, error) {
	if r.stalled.CompareAndSwap(false, true) {
		return nil, false, fmt.Errorf("read pre-queue: %w", ports.ErrUnavailable)
	}
	return r.WaitingRoom.Prequeued(ctx, eventID)
}

// A store that fails at opensAt delays the opening by one retry of the timer, not until a
// reconciliation pass comes round to the event.
func TestPrequeue_ATimerThatFailsTriesAgainShortly(t *testing.T) {
	ctx := context.Background()
	clock := memory.NewClock(saleDay)
	sleeper := newHeldSleeper(clock)
	r := newRoomsWaitingOn(clock, sleeper)
	deps := r.deps
	deps.Room = &stalledOnce{WaitingRoom: deps.Room}
	svc := waiting.NewService(deps, waiting.Config{})
	defer svc.Close()
	event := saleOpeningInAMinute(t, svc)
	<-sleeper.asked
	if _, _, err := svc.Enter(ctx, event.ID, "early"); err != nil {
		t.Fatal(err)
	}
	sleeper.release <- struct{}{} // opensAt: the first read fails; no reconciliation pass runs
	select {
	case d := <-sleeper.asked:
		if d > time.Second {
			t.Fatalf("after failing, the timer waits %v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the timer gave up after one failure")
	}
	sleeper.release <- struct{}{}
	testkit.Eventually(t, 10*time.Second, "the pre-queue opened by its timer's second try", func() error {
		public, err := svc.Event(ctx, event.ID)
		if err == nil && public.Seed == "" {
			err = errors.New("not open")
		}
		return err
	})
}

// lostRooms is a waiting-room store that can lose every room at once, as a Redis restarted
// without persistence does.
type lostRooms struct{ ports.WaitingRoom }

// A room the store loses after the pre-queue opened is opened again ungated: the instance that
// opened it remembers the opening as done and would never open a new gate, so arrivals after
// the loss would wait as pre-queued, without a rank, for good.
func TestPrequeue_ARoomLostAfterOpeningIsOpenedAgainUngated(t *testing.T) {
	ctx := context.Background()
	clock := memory.NewClock(saleDay)
	r := newRooms(clock)
	store := &lostRooms{WaitingRoom: r.deps.Room}
	deps := r.deps
	deps.Room = store
	svc := waiting.NewService(deps, waiting.Config{})
	defer svc.Close()
	event := saleOpeningInAMinute(t, svc)
	if _, _, err := svc.Enter(ctx, event.ID, "early"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := svc.Status(ctx, event.ID, "early"); err != nil || v.Status != waiting.StatusReady {
		t.Fatalf("after the opening: %+v, %v; want ready", v, err)
	}

	store.WaitingRoom = memory.NewWaitingRoom(clock)
	v, created, err := svc.Enter(ctx, event.ID, "after-loss")
	if err != nil || !created || v.Status != waiting.StatusReady || v.Rank != 0 {
		t.Fatalf("entering the room the store lost: %+v, created %v, %v; want ready at rank 0", v, created, err)
	}
	if _, _, err := svc.Claim(ctx, event.ID, "after-loss"); err != nil {
		t.Fatalf("claim in the room opened again: %v", err)
	}
}

func TestPrequeue_CloseEndsTheOpeningTimers(t *testing.T) {
	ctx := context.Background()
	clock := memory.NewClock(saleDay)
	sleeper := newHeldSleeper(clock)
	r := newRoomsWaitingOn(clock, sleeper)
	event := saleOpeningInAMinute(t, r.svc)
	<-sleeper.asked
	r.svc.Close() // returns only once the timer has ended
	if err := r.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-sleeper.asked:
		t.Fatalf("a timer was armed after Close (%v)", d)
	default:
	}
	if public, err := r.svc.Event(ctx, event.ID); err != nil || public.Seed != "" {
		t.Fatalf("the pre-queue opened without its time coming: %+v, %v", public, err)
	}
}

// openings records the pre-queue openings an Observer heard.
type openings struct {
	mu   sync.Mutex
	late map[string][]time.Duration // by event id
}

func (o *openings) RoomObserved(string, ports.RoomStats)       {}
func (o *openings) WaitErrorsObserved(string, []time.Duration) {}
func (o *openings) RoomsInUse([]string)                        {}
func (o *openings) PrequeueOpened(eventID string, late time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.late[eventID] = append(o.late[eventID], late)
}

func TestPrequeue_TheOpeningIsObservedOnceWithHowLateItWas(t *testing.T) {
	ctx := context.Background()
	r, clock, event := prequeued(t, time.Minute, "shuffle", userNames(20, "early"))
	heard := &openings{late: map[string][]time.Duration{}}
	// Two instances on the same stores, heard by one observer.
	instance := func() *waiting.Service {
		d := r.deps
		d.Observer, d.Rates = heard, nil
		return waiting.NewService(d, waiting.Config{})
	}
	first, second := instance(), instance()
	clock.Advance(time.Minute + 1500*time.Millisecond)
	for _, pass := range []*waiting.Service{first, second, first} {
		if err := pass.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := heard.late[event.ID]; !slices.Equal(got, []time.Duration{1500 * time.Millisecond}) {
		t.Fatalf("openings observed %v, want one, 1.5 s after opensAt", got)
	}
}
