package waiting_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/application/waiting"
	domainwaiting "github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

// newBroker returns a broker on in-memory adapters and a push event in it.
func newBroker(t *testing.T) (*waiting.Broker, string) {
	t.Helper()
	r := newRooms(memory.NewClock(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)))
	event, err := r.svc.CreateEvent(context.Background(), waiting.CreateEventCommand{Name: "close", Seats: 2, Slots: 1, Mode: "push"})
	if err != nil {
		t.Fatal(err)
	}
	return waiting.NewBroker(r.broker, "broker-1", waiting.BrokerConfig{}), event.ID
}

// stream is an adapter's side of a subscription: on End it leaves, as an adapter does once its
// connection is closed, unless it hangs.
type stream struct {
	broker   *waiting.Broker
	sub      *waiting.Subscription
	hangs    bool
	ended    atomic.Bool
	admitted atomic.Int32
	prequeue atomic.Int32
	soldOut  atomic.Bool
	replaced atomic.Bool
}

func (s *stream) Position(waiting.Position)     {}
func (s *stream) Prequeue(waiting.PrequeueView) { s.prequeue.Add(1) }
func (s *stream) Admitted(waiting.Admission) {
	s.admitted.Add(1)
}

func (s *stream) admissions() int { return int(s.admitted.Load()) }
func (s *stream) End() {
	s.ended.Store(true)
	if !s.hangs {
		go s.broker.Leave(s.sub)
	}
}

// SoldOut records the news and ends as an adapter does.
func (s *stream) SoldOut() {
	s.soldOut.Store(true)
	s.End()
}

// Replaced records the news and ends as an adapter does.
func (s *stream) Replaced() {
	s.replaced.Store(true)
	s.End()
}

func join(t *testing.T, b *waiting.Broker, eventID, userID string, hangs bool) *stream {
	t.Helper()
	s := &stream{broker: b, hangs: hangs}
	sub, err := b.Join(context.Background(), eventID, userID, s)
	if err != nil {
		t.Fatal(err)
	}
	s.sub = sub
	return s
}

func TestBrokerClose_EndsEveryConnectionAndWaitsForThemToLeave(t *testing.T) {
	b, eventID := newBroker(t)
	join(t, b, eventID, "admitted", false)
	join(t, b, eventID, "waiting", false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := b.Join(ctx, eventID, "late", &stream{broker: b}); !errors.Is(err, waiting.ErrBrokerClosed) {
		t.Fatalf("join after close: %v, want ErrBrokerClosed", err)
	}
}

func TestBrokerClose_GivesUpOnAConnectionThatNeverLeaves(t *testing.T) {
	b, eventID := newBroker(t)
	join(t, b, eventID, "stuck", true)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := b.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close: %v, want the deadline", err)
	}
}

// stallTimeout is the heartbeat timeout of the stall tests; their clock moves only when told.
const stallTimeout = 10 * time.Second

// stallRoom is a push event with one slot on in-memory adapters whose clock the test moves, a
// broker and a dispatcher on it, and what they observed.
type stallRoom struct {
	clock   *memory.Clock
	rooms   rooms
	svc     *waiting.Service
	queue   *flakyQueue
	broker  *waiting.Broker
	seen    *observed
	log     *slog.Logger
	eventID string
}

func newStallRoom(t *testing.T) *stallRoom {
	t.Helper()
	clock := memory.NewClock(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC))
	rooms := newRooms(clock)
	event, err := rooms.svc.CreateEvent(context.Background(), waiting.CreateEventCommand{Name: "stall", Seats: 5, Slots: 1, Mode: "push"})
	if err != nil {
		t.Fatal(err)
	}
	r := &stallRoom{clock: clock, rooms: rooms, svc: rooms.svc, queue: &flakyQueue{PushQueue: rooms.coord.PushQueue},
		seen: &observed{}, eventID: event.ID}
	r.log = slog.New(slog.NewTextHandler(t.Output(), nil))
	r.broker = r.newBroker(waiting.BrokerConfig{HeartbeatTimeout: stallTimeout})
	return r
}

// newBroker is the broker "broker-1" on the flaky queue.
func (r *stallRoom) newBroker(cfg waiting.BrokerConfig) *waiting.Broker {
	d := r.rooms.broker
	d.Queue, d.Observer, d.Log = r.queue, r.seen, r.log
	return waiting.NewBroker(d, "broker-1", cfg)
}

func (r *stallRoom) dispatcher(id string) *waiting.Dispatcher {
	d := r.rooms.dispatcher
	d.Queue, d.Observer, d.Log = r.queue, r.seen, r.log
	return waiting.NewDispatcher(d, id, waiting.DispatcherConfig{HeartbeatTimeout: stallTimeout})
}

// dispatch is one dispatcher tick run to its end: reap dead brokers, then promote and route
// the event here rather than in Run's pool.
func (r *stallRoom) dispatch(t *testing.T, d *waiting.Dispatcher) {
	t.Helper()
	if err := d.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := d.Promote(context.Background(), r.eventID); err != nil {
		t.Fatal(err)
	}
}

func (r *stallRoom) view(t *testing.T) waiting.QueueView {
	t.Helper()
	v, err := r.svc.Queue(context.Background(), r.eventID)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// flakyQueue is the in-memory push queue whose heartbeats fail while down is set: a broker cut
// off from the store, which the memory adapter cannot be.
type flakyQueue struct {
	ports.PushQueue
	down atomic.Bool
}

func (q *flakyQueue) Heartbeat(ctx context.Context, brokerID string, ttl time.Duration) (bool, error) {
	if q.down.Load() {
		return false, fmt.Errorf("heartbeat: %w", ports.ErrUnavailable)
	}
	return q.PushQueue.Heartbeat(ctx, brokerID, ttl)
}

// observed records what the push mode reported to its observer.
type observed struct {
	mu                           sync.Mutex
	lapses, lapseStreams, reaped int
	reclaimed                    int
}

func (o *observed) Promoted(string, int, time.Duration) {}
func (o *observed) PromotionBacklog(int)                {}
func (o *observed) Connections(string, int)             {}
func (o *observed) Broadcast(string, time.Duration)     {}
func (o *observed) Delivered(string)                    {}
func (o *observed) DispatcherStalled(time.Duration)     {}
func (o *observed) DispatcherTicked()                   {}
func (o *observed) BrokerBeat()                         {}
func (o *observed) BrokerLapsed(streams int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lapses++
	o.lapseStreams += streams
}
func (o *observed) BrokerReaped(int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reaped++
}
func (o *observed) EntriesReclaimed(_ string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reclaimed += n
}

func (o *observed) counts() (lapses, lapseStreams, reaped, reclaimed int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lapses, o.lapseStreams, o.reaped, o.reclaimed
}

// flakyIndex is the in-memory room index whose listing fails while down is set: a dispatcher
// cut off from the store.
type flakyIndex struct {
	ports.RoomIndex
	down atomic.Bool
}

func (i *flakyIndex) Events(ctx context.Context) ([]string, error) {
	if i.down.Load() {
		return nil, fmt.Errorf("list events: %w", ports.ErrUnavailable)
	}
	return i.RoomIndex.Events(ctx)
}

// A dispatcher whose tick could not reach the store reaps no broker until a heartbeat timeout
// after the store answers again: no broker could beat meanwhile (a Redis down, then restarted
// from its append-only file with every heartbeat expired), and their users get that long to
// reconnect and keep their places. Then the broker, silent still, is reaped.
func TestDispatcher_ReapsNobodyUntilAHeartbeatTimeoutAfterTheStoreAnswersAgain(t *testing.T) {
	ctx := context.Background()
	r := newStallRoom(t)
	deps := r.rooms.dispatcher
	index := &flakyIndex{RoomIndex: deps.Index}
	deps.Index, deps.Queue, deps.Observer, deps.Log = index, r.queue, r.seen, r.log
	d := waiting.NewDispatcher(deps, "dispatcher-1", waiting.DispatcherConfig{HeartbeatTimeout: stallTimeout})
	r.broker.Tick(ctx)
	join(t, r.broker, r.eventID, "first", false)
	r.dispatch(t, d)
	if v := r.view(t); v.Admitted != 1 {
		t.Fatalf("before the outage: %+v", v)
	}

	index.down.Store(true)
	if err := d.Tick(ctx); !errors.Is(err, ports.ErrUnavailable) {
		t.Fatalf("a tick with the store down: %v, want ErrUnavailable", err)
	}
	r.clock.Advance(stallTimeout) // the broker's heartbeat lapses meanwhile
	index.down.Store(false)
	for _, after := range []time.Duration{0, stallTimeout - time.Millisecond} {
		r.clock.Advance(after)
		r.dispatch(t, d)
		if _, _, reaped, _ := r.seen.counts(); reaped != 0 || r.view(t).Admitted != 1 {
			t.Fatalf("%v after the store answered again: %d reaped, %+v; want nobody reaped yet", after, reaped, r.view(t))
		}
	}
	r.clock.Advance(time.Millisecond)
	r.dispatch(t, d)
	if _, _, reaped, _ := r.seen.counts(); reaped != 1 || r.view(t).Admitted != 0 {
		t.Fatalf("a heartbeat timeout after the store answered again: %d reaped, %+v; want the broker reaped", reaped, r.view(t))
	}
}

// A broker that stalled past the heartbeat timeout and was reaped learns it from its next
// heartbeat: it ends every stream it holds (nobody is left on a silent stream), counts it, and
// moves to a new id. The users reconnect into the queue, and the reaping of the old id, which
// comes once its renewed heartbeat lapses too, leaves them there.
func TestBroker_ReapedBrokerEndsEveryStreamAndItsUsersReconnect(t *testing.T) {
	ctx := context.Background()
	r := newStallRoom(t)
	d := r.dispatcher("dispatcher-1")
	r.broker.Tick(ctx)
	first := join(t, r.broker, r.eventID, "first", false)
	second := join(t, r.broker, r.eventID, "second", false)
	r.dispatch(t, d) // first promoted, second waits
	if v := r.view(t); v.Admitted != 1 || v.Waiting != 1 {
		t.Fatalf("before the stall: %+v", v)
	}

	// The broker stalls; the dispatcher reaps it.
	r.clock.Advance(stallTimeout)
	r.dispatch(t, d)
	if v := r.view(t); v.Admitted != 0 || v.Waiting != 0 || v.Connections != 0 {
		t.Fatalf("after the reap: %+v", v)
	}
	if first.ended.Load() || second.ended.Load() {
		t.Fatal("a stream ended while the broker was stalled")
	}

	// It resumes.
	r.broker.Tick(ctx)
	if !first.ended.Load() || !second.ended.Load() {
		t.Fatalf("after the reaped broker's tick: streams ended %v %v, want both", first.ended.Load(), second.ended.Load())
	}
	if lapses, streams, reaped, _ := r.seen.counts(); lapses != 1 || streams != 2 || reaped != 1 {
		t.Fatalf("observed %d lapses ending %d streams, %d reaps; want 1, 2, 1", lapses, streams, reaped)
	}
	newID := r.broker.ID()
	if newID == "broker-1" || strings.HasPrefix(newID, "broker-1|") {
		t.Fatalf("broker id after the lapse %q", newID)
	}

	join(t, r.broker, r.eventID, "first", false)
	join(t, r.broker, r.eventID, "second", false)
	r.dispatch(t, d)
	if v := r.view(t); v.Admitted != 1 || v.Waiting != 1 || v.Connections != 2 {
		t.Fatalf("after reconnecting: %+v", v)
	}
	// The broker keeps beating under its new id; its old id's renewed lease lapses and is
	// reaped, which must not touch the users now held under the new id.
	for range 3 {
		r.clock.Advance(stallTimeout / 2)
		r.broker.Tick(ctx)
		r.dispatch(t, d)
	}
	if _, _, reaped, _ := r.seen.counts(); reaped != 2 {
		t.Fatalf("reaps %d, want the old id's second", reaped)
	}
	if v := r.view(t); v.Admitted != 1 || v.Waiting != 1 || v.Connections != 2 {
		t.Fatalf("after the old id was reaped: %+v", v)
	}
	if lapses, _, _, _ := r.seen.counts(); lapses != 1 || r.broker.ID() != newID {
		t.Fatalf("a beating broker lapsed again: %d lapses, id %q", lapses, r.broker.ID())
	}
}

// A user's newer connection (a reconnect through a load balancer, a second tab) replaces the
// older one, on the same broker at once and on another broker through its dispatch stream: the
// older stream is told, so its client does not reconnect by itself and take the place back, and
// ends; left open, it would never be sent the admission, which goes to the newer one.
func TestBroker_ANewerConnectionReplacesTheOlderOneHereOrOnAnotherBroker(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	defer running.Wait()
	defer cancel()
	r := newRooms(memory.NewClock(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)))
	event, err := r.svc.CreateEvent(ctx, waiting.CreateEventCommand{Name: "two", Seats: 5, Slots: 3, Mode: "push"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := waiting.BrokerConfig{Tick: 10 * time.Millisecond}
	first := waiting.NewBroker(r.broker, "instance-1", cfg)
	second := waiting.NewBroker(r.broker, "instance-2", cfg)
	running.Go(func() { first.Run(ctx) })
	running.Go(func() { second.Run(ctx) })
	d := waiting.NewDispatcher(r.dispatcher, "dispatcher", waiting.DispatcherConfig{})
	admitted := func(what string, s *stream) {
		t.Helper()
		testkit.Eventually(t, 5*time.Second, what, func() error {
			if err := d.Promote(ctx, event.ID); err != nil {
				return err
			}
			if s.admissions() == 0 {
				return errors.New("not admitted yet")
			}
			return nil
		})
	}
	// instance-1 reads its dispatch stream, as a broker does from its start on.
	admitted("another user admitted on instance-1", join(t, first, event.ID, "other", false))

	here := join(t, first, event.ID, "v", false)
	join(t, first, event.ID, "v", false)
	if !here.replaced.Load() || !here.ended.Load() {
		t.Fatal("a newer connection on the same broker left the older one untold or open")
	}

	older := join(t, first, event.ID, "u", false)
	newer := join(t, second, event.ID, "u", false)
	testkit.Eventually(t, 5*time.Second, "the older connection, on instance-1, told it was replaced", func() error {
		if !older.replaced.Load() || !older.ended.Load() {
			return errors.New("still open")
		}
		return nil
	})
	admitted("the newer connection admitted", newer)
	if newer.ended.Load() || older.admissions() != 0 {
		t.Fatalf("newer ended %v, older admitted %d times; want the newer open and the older never admitted",
			newer.ended.Load(), older.admissions())
	}
}

// heldConnect holds the first Connect until released.
type heldConnect struct {
	ports.BrokerQueue
	calls   atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (q *heldConnect) Connect(ctx context.Context, eventID, userID, owner string) (ports.QueuePlace, error) {
	if q.calls.Add(1) == 1 {
		close(q.entered)
		<-q.release
	}
	return q.BrokerQueue.Connect(ctx, eventID, userID, owner)
}

// Two joins of one user on one broker (two tabs opened at once) whose Connects finish in the
// other order than the broker registered them: the one registered last holds the user, as its
// older one was told, and stays in line once the older one leaves.
func TestBroker_TwoJoinsOfOneUserWhoseConnectsCrossLeaveTheNewerInLine(t *testing.T) {
	ctx := context.Background()
	r := newRooms(memory.NewClock(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)))
	event, err := r.svc.CreateEvent(ctx, waiting.CreateEventCommand{Name: "race", Seats: 5, Slots: 1, Mode: "push"})
	if err != nil {
		t.Fatal(err)
	}
	held := &heldConnect{BrokerQueue: r.broker.Queue, entered: make(chan struct{}), release: make(chan struct{})}
	deps := r.broker
	deps.Queue = held
	b := waiting.NewBroker(deps, "broker-1", waiting.BrokerConfig{})

	older := &stream{broker: b, hangs: true}
	joined := make(chan error, 1)
	go func() {
		var err error
		older.sub, err = b.Join(ctx, event.ID, "u", older) // registered first, its Connect held
		joined <- err
	}()
	<-held.entered
	newer := join(t, b, event.ID, "u", true) // registered second, its Connect first
	close(held.release)
	if err := <-joined; err != nil {
		t.Fatal(err)
	}
	if !older.replaced.Load() || newer.ended.Load() {
		t.Fatalf("older told replaced %v, newer ended %v", older.replaced.Load(), newer.ended.Load())
	}
	b.Leave(older.sub) // as the adapter does once the older stream's last frame is written
	testkit.Eventually(t, 5*time.Second, "the older connection's leave applied", func() error {
		if v, err := r.svc.Queue(ctx, event.ID); err != nil || v.Connections != 1 {
			return fmt.Errorf("%+v, %w", v, err)
		}
		return nil
	})
	snap, err := r.coord.PushQueue.Snapshot(ctx, event.ID)
	if err != nil || len(snap.Waiting) != 1 || snap.Waiting[0] != "u" {
		t.Fatalf("the line after the older connection left: %+v, %v; want u, held by the newer one", snap, err)
	}
}

// A broker whose heartbeat lapsed before any dispatcher reaped it ends its streams too (it
// cannot know whether it was reaped); users who reconnect within the reconnect grace keep their
// admission and their place, and the later reaping of the old id leaves them there.
func TestBroker_LapsedBrokersUsersKeepTheirPlaceWithinTheGrace(t *testing.T) {
	ctx := context.Background()
	r := newStallRoom(t)
	r.broker = r.newBroker(waiting.BrokerConfig{HeartbeatTimeout: stallTimeout, ReconnectGrace: time.Hour})
	d := r.dispatcher("dispatcher-1")
	r.broker.Tick(ctx)
	first := join(t, r.broker, r.eventID, "first", false)
	second := join(t, r.broker, r.eventID, "second", false)
	r.dispatch(t, d)

	r.clock.Advance(stallTimeout)
	r.broker.Tick(ctx) // before any dispatcher tick: lapsed, not reaped
	if !first.ended.Load() || !second.ended.Load() {
		t.Fatal("a lapsed broker kept its streams")
	}
	again := join(t, r.broker, r.eventID, "first", false)
	join(t, r.broker, r.eventID, "second", false)
	if again.admissions() != 1 {
		t.Fatalf("the admitted user reconnected within the grace got %d admissions, want its own again", again.admissions())
	}
	for range 3 {
		r.clock.Advance(stallTimeout / 2)
		r.broker.Tick(ctx)
		r.dispatch(t, d)
	}
	if _, _, reaped, _ := r.seen.counts(); reaped != 1 {
		t.Fatalf("reaps %d, want the old id's", reaped)
	}
	if v := r.view(t); v.Admitted != 1 || v.Waiting != 1 || v.Claims != 1 || v.Connections != 2 {
		t.Fatalf("after reconnecting within the grace and the old id's reap: %+v", v)
	}
}

// A broker whose heartbeats fail keeps its streams until none has succeeded for the heartbeat
// timeout, then ends them: by then a dispatcher may have reaped it.
func TestBroker_ThatCannotHeartbeatEndsItsStreamsAfterTheTimeout(t *testing.T) {
	ctx := context.Background()
	r := newStallRoom(t)
	r.broker.Tick(ctx)
	s := join(t, r.broker, r.eventID, "cut-off", false)
	r.queue.down.Store(true)
	r.clock.Advance(stallTimeout - time.Millisecond)
	r.broker.Tick(ctx)
	if s.ended.Load() {
		t.Fatal("the stream ended before the heartbeat timeout")
	}
	r.clock.Advance(time.Millisecond)
	r.broker.Tick(ctx)
	if !s.ended.Load() {
		t.Fatal("the stream of a broker with no heartbeat for the timeout is still open")
	}
	if lapses, streams, _, _ := r.seen.counts(); lapses != 1 || streams != 1 {
		t.Fatalf("observed %d lapses ending %d streams, want 1 and 1", lapses, streams)
	}
	// Still cut off: the new id never beat, so it has nothing to lapse.
	r.clock.Advance(2 * stallTimeout)
	r.broker.Tick(ctx)
	if lapses, _, _, _ := r.seen.counts(); lapses != 1 {
		t.Fatalf("%d lapses while still cut off, want 1", lapses)
	}
}

// Entries a dispatcher read and left unacknowledged (it stalled) are routed by another once
// idle for the heartbeat timeout, and counted; not before.
func TestDispatcher_RoutesTheEntriesOfAStalledDispatcher(t *testing.T) {
	ctx := context.Background()
	r := newStallRoom(t)
	r.broker.Tick(ctx)
	join(t, r.broker, r.eventID, "promoted", false)
	// The stalled dispatcher promoted and read the entry, and stopped there.
	if _, _, err := r.queue.Promote(ctx, r.eventID, time.Minute, ports.EntryRead{}); err != nil {
		t.Fatal(err)
	}
	if held, err := r.queue.ReadEntries(ctx, r.eventID, ports.EntryRead{Consumer: "stalled", Count: 10, ReclaimIdle: stallTimeout}); err != nil || len(held) != 1 {
		t.Fatalf("the stalled dispatcher read %v, %v", held, err)
	}
	other := r.dispatcher("other")
	routed := func() int {
		t.Helper()
		got, err := r.queue.ReadDispatch(ctx, r.broker.ID(), 10, 0, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	if err := other.Promote(ctx, r.eventID); err != nil {
		t.Fatal(err)
	}
	if n := routed(); n != 0 {
		t.Fatalf("%d routed before the entry was idle for the timeout", n)
	}
	r.clock.Advance(stallTimeout)
	if err := other.Promote(ctx, r.eventID); err != nil {
		t.Fatal(err)
	}
	if n := routed(); n != 1 {
		t.Fatalf("%d routed after the timeout, want the stalled dispatcher's entry", n)
	}
	if _, _, _, reclaimed := r.seen.counts(); reclaimed != 1 {
		t.Fatalf("reclaimed entries counted %d, want 1", reclaimed)
	}
	if v := r.view(t); v.Admitted != 1 || v.Claims != 1 {
		t.Fatalf("a reclaimed entry promoted again: %+v", v)
	}
}

// A room the store does not have (never opened, or lost in a flush) is opened from the
// database by the dispatcher and the broker themselves, as by the Service: the event's slots,
// and the seat counter at the free seats.
func TestPush_RoomTheStoreLostIsOpenedFromTheDatabase(t *testing.T) {
	ctx := context.Background()
	clock := memory.NewClock(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC))
	r := newRooms(clock)
	event, err := domainwaiting.NewEvent(system.UUIDs{}.NewID(), "lost", 3, 1, domainwaiting.ModePush, 0, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	err = r.stores.Tx.InTx(ctx, func(ctx context.Context) error {
		if err := r.stores.Events.Create(ctx, event); err != nil {
			return err
		}
		return r.stores.Seats.Create(ctx, event.ID(), event.Seats())
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.coord.WaitingRoom.Stats(ctx, event.ID()); !errors.Is(err, ports.ErrRoomNotOpen) {
		t.Fatalf("stats before any call: %v, want no room", err)
	}

	dispatcher := waiting.NewDispatcher(r.dispatcher, "dispatcher-1", waiting.DispatcherConfig{})
	if err := dispatcher.Promote(ctx, event.ID()); err != nil {
		t.Fatalf("promote in a room the store lost: %v", err)
	}
	if st, err := r.coord.WaitingRoom.Stats(ctx, event.ID()); err != nil || st.Slots != 1 || st.RemainingSeats != 3 {
		t.Fatalf("room the dispatcher opened: %+v, %v; want 1 slot and 3 seats", st, err)
	}

	// Lost again: a fresh store under the same database.
	fresh := memory.NewCoordination(clock)
	r.broker.Rooms, r.broker.Queue = fresh.WaitingRoom, fresh.PushQueue
	broker := waiting.NewBroker(r.broker, "broker-1", waiting.BrokerConfig{})
	first := join(t, broker, event.ID(), "first", false)
	if st, err := fresh.WaitingRoom.Stats(ctx, event.ID()); err != nil || st.Slots != 1 || st.Waiting != 1 || st.RemainingSeats != 3 {
		t.Fatalf("room the broker opened: %+v, %v; want 1 slot, 1 waiting and 3 seats", st, err)
	}
	if first.admissions() != 0 {
		t.Fatal("a waiting user was admitted on joining")
	}
}

// lostAnswerQueue runs Connect in the store and then loses its answer, as a timeout does.
type lostAnswerQueue struct{ ports.PushQueue }

func (q lostAnswerQueue) Connect(ctx context.Context, eventID, userID, owner string) (ports.QueuePlace, error) {
	if _, err := q.PushQueue.Connect(ctx, eventID, userID, owner); err != nil {
		return ports.QueuePlace{}, err
	}
	return ports.QueuePlace{}, fmt.Errorf("connect: answer lost: %w", ports.ErrUnavailable)
}

// A join whose Connect ran but answered an error leaves as a connection does: the user holds
// no place (and so can take no slot) without a stream.
func TestBroker_AJoinThatFailedAfterConnectLeavesNoPlaceBehind(t *testing.T) {
	ctx := context.Background()
	r := newStallRoom(t)
	d := r.rooms.broker
	d.Queue = lostAnswerQueue{PushQueue: r.rooms.coord.PushQueue}
	b := waiting.NewBroker(d, "broker-lost", waiting.BrokerConfig{})
	if _, err := b.Join(ctx, r.eventID, "lost", &stream{broker: b, hangs: true}); !errors.Is(err, ports.ErrUnavailable) {
		t.Fatalf("join: %v, want the lost answer's error", err)
	}
	if v := r.view(t); v.Waiting != 0 || v.Admitted != 0 {
		t.Fatalf("after the failed join: %+v, want nobody waiting or admitted", v)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatalf("close: %v (the failed join still counted as a connection)", err)
	}
}

// beforeConnect runs hook, once, before the Connect it delegates to: the exact interleaving of a
// race between that Connect and what hook does. A hook's error is Connect's, which then never
// reaches the store.
type beforeConnect struct {
	ports.BrokerQueue
	hook atomic.Pointer[func() error]
}

func (q *beforeConnect) Connect(ctx context.Context, eventID, userID, owner string) (ports.QueuePlace, error) {
	if hook := q.hook.Swap(nil); hook != nil {
		if err := (*hook)(); err != nil {
			return ports.QueuePlace{}, err
		}
	}
	return q.BrokerQueue.Connect(ctx, eventID, userID, owner)
}

// newTabsRoom is a push event of one slot on in-memory adapters, and a broker without reconnect
// grace on a queue that runs a hook before a Connect.
func newTabsRoom(t *testing.T) (rooms, string, *waiting.Broker, *beforeConnect) {
	t.Helper()
	r := newRooms(memory.NewClock(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)))
	event, err := r.svc.CreateEvent(context.Background(), waiting.CreateEventCommand{Name: "tabs", Seats: 5, Slots: 1, Mode: "push"})
	if err != nil {
		t.Fatal(err)
	}
	q := &beforeConnect{BrokerQueue: r.broker.Queue}
	deps := r.broker
	deps.Queue = q
	return r, event.ID, waiting.NewBroker(deps, "broker-1", waiting.BrokerConfig{ReconnectGrace: 0}), q
}

// With no reconnect grace, a user's second connection on the same broker (a second tab, a
// reconnect before the old socket's close was noticed) tells the older one it was replaced,
// whose adapter then leaves; that leave coming before the newer connection's Connect costs the
// user neither the place nor the admission, which the newer connection holds.
func TestBroker_AReplacedConnectionsLeaveBeforeTheNewerConnectKeepsTheUsersPlace(t *testing.T) {
	for _, admitted := range []bool{false, true} {
		t.Run(fmt.Sprintf("admitted=%v", admitted), func(t *testing.T) {
			ctx := context.Background()
			r, eventID, b, q := newTabsRoom(t)
			if !admitted {
				join(t, b, eventID, "ahead", true)
			}
			older := join(t, b, eventID, "u", true)
			join(t, b, eventID, "behind", true)
			if admitted {
				d := waiting.NewDispatcher(r.dispatcher, "dispatcher", waiting.DispatcherConfig{})
				if err := d.Promote(ctx, eventID); err != nil {
					t.Fatal(err)
				}
			}
			// The older stream's adapter leaves as soon as it is told, before the newer Connect.
			leave := func() error {
				if !older.replaced.Load() {
					t.Error("the older connection was not told it was replaced before the newer one's Connect")
				}
				b.Leave(older.sub)
				return nil
			}
			q.hook.Store(&leave)
			newer := join(t, b, eventID, "u", true)
			if q.hook.Load() != nil {
				t.Fatal("the newer join did not Connect")
			}
			snap, err := r.coord.PushQueue.Snapshot(ctx, eventID)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"ahead", "u", "behind"}
			if admitted {
				want = []string{"behind"}
				if newer.admissions() != 1 {
					t.Errorf("the newer connection was sent the admission %d times, want once", newer.admissions())
				}
				if v, err := r.svc.Queue(ctx, eventID); err != nil || v.Admitted != 1 {
					t.Errorf("queue: %+v, %v; want u still admitted", v, err)
				}
			}
			if !slices.Equal(snap.Waiting, want) {
				t.Errorf("line %v, want %v", snap.Waiting, want)
			}
			// The newer connection's own departure still applies the rules.
			b.Leave(newer.sub)
			snap, err = r.coord.PushQueue.Snapshot(ctx, eventID)
			if err != nil || slices.Contains(snap.Waiting, "u") {
				t.Fatalf("line after the newer connection left: %v, %v; want u out", snap.Waiting, err)
			}
			if v, err := r.svc.Queue(ctx, eventID); err != nil || v.Admitted != 0 {
				t.Fatalf("queue after the newer connection left: %+v, %v; want nobody admitted", v, err)
			}
		})
	}
}

// A user's newer connection whose Connect never reached the store (it failed) leaves as a
// connection does, for the older one it replaced too, which left nothing: the user holds no
// place without a stream.
func TestBroker_ANewerConnectionWhoseConnectFailedTakesTheOlderOnesPlaceAway(t *testing.T) {
	ctx := context.Background()
	r, eventID, b, q := newTabsRoom(t)
	older := join(t, b, eventID, "u", false)
	fail := func() error { return fmt.Errorf("connect: %w", ports.ErrUnavailable) }
	q.hook.Store(&fail)
	if _, err := b.Join(ctx, eventID, "u", &stream{broker: b, hangs: true}); !errors.Is(err, ports.ErrUnavailable) {
		t.Fatalf("join: %v, want the failed Connect's error", err)
	}
	if !older.replaced.Load() {
		t.Fatal("the older connection was not told it was replaced")
	}
	closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := b.Close(closeCtx); err != nil { // both connections left
		t.Fatalf("close: %v", err)
	}
	if v, err := r.svc.Queue(ctx, eventID); err != nil || v.Waiting != 0 || v.Connections != 0 {
		t.Fatalf("after both connections left: %+v, %v; want nobody waiting or held", v, err)
	}
}
