package redis

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/application/guard"
	appwaiting "github.com/rushgate/rushgate/application/waiting"
	"github.com/rushgate/rushgate/test/testenv"
)

// roundTrips is a go-redis hook that names every round trip a client makes: one command, or
// one pipeline (its commands joined by "+"; on a cluster one pipeline is sent to its nodes at
// once). Scripts are named by which of this package's scripts they run.
type roundTrips struct {
	mu    sync.Mutex
	trips []string
	// blocks receives a signal each time a blocking read starts: the broker waits on its
	// dispatch stream.
	blocks chan struct{}
}

func newRoundTrips() *roundTrips { return &roundTrips{blocks: make(chan struct{}, 64)} }

var scriptNames = map[string]string{
	readGroupScript.Hash(): "read", issueScript.Hash(): "issue", promoteScript.Hash(): "promote",
	snapshotScript.Hash(): "snapshot", ackScript.Hash(): "ack", predictScript.Hash(): "predict",
}

func commandName(cmd goredis.Cmder) string {
	name := cmd.Name()
	if name == "evalsha" || name == "eval" {
		if sha, ok := cmd.Args()[1].(string); ok && scriptNames[sha] != "" {
			return scriptNames[sha]
		}
		return name + "?"
	}
	if name == "xreadgroup" && strings.Contains(strings.ToLower(fmt.Sprint(cmd.Args())), "block") {
		return "block"
	}
	return name
}

// connectionSetup are the commands go-redis sends on a connection it has just dialled: a
// connection's cost, once, not a tick's (a busy machine makes the pool dial mid-test).
var connectionSetup = []string{"hello", "client"}

func (r *roundTrips) record(cmds []goredis.Cmder) {
	names := make([]string, 0, len(cmds))
	for _, c := range cmds {
		if n := commandName(c); !slices.Contains(names, n) && !slices.Contains(connectionSetup, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return
	}
	trip := strings.Join(names, "+")
	r.mu.Lock()
	r.trips = append(r.trips, trip)
	r.mu.Unlock()
	if trip == "block" {
		r.blocks <- struct{}{}
	}
}

func (r *roundTrips) since(mark int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.trips[mark:]...)
}

func (r *roundTrips) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.trips)
}

// awaitBlock waits for the next blocking read to start.
func (r *roundTrips) awaitBlock(t *testing.T) {
	t.Helper()
	select {
	case <-r.blocks:
	case <-time.After(testenv.DependencyTimeout):
		t.Fatal("the broker never went back to waiting on its dispatch stream")
	}
}

// drainBlocks forgets the blocking reads started so far.
func (r *roundTrips) drainBlocks() {
	for {
		select {
		case <-r.blocks:
		default:
			return
		}
	}
}

func (r *roundTrips) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (r *roundTrips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		r.record([]goredis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		r.record(cmds)
		return next(ctx, cmds)
	}
}

// countingRoom is a waiting room on a client of its own to redisURL whose round trips are
// counted.
func countingRoom(t *testing.T, redisURL, prefix string) (*WaitingRoom, goredis.UniversalClient, *roundTrips) {
	t.Helper()
	client, trips := countingClient(t, redisURL)
	return NewWaitingRoom(client, prefix), client, trips
}

// countingClient is a client of its own to redisURL, closed when the test ends, whose round
// trips are counted.
func countingClient(t *testing.T, redisURL string) (goredis.UniversalClient, *roundTrips) {
	t.Helper()
	client, err := NewClient(redisURL, Options{
		DialTimeout: testenv.DependencyTimeout, ReadTimeout: testenv.DependencyTimeout, WriteTimeout: testenv.DependencyTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	trips := newRoundTrips()
	client.AddHook(trips)
	return client, trips
}

// admissionStream counts the admissions a connection receives.
type admissionStream struct{ admitted chan<- string }

func (s admissionStream) Position(appwaiting.Position)     {}
func (s admissionStream) Admitted(a appwaiting.Admission)  { s.admitted <- a.Token }
func (s admissionStream) End()                             {}
func (s admissionStream) Prequeue(appwaiting.PrequeueView) {}
func (s admissionStream) SoldOut()                         {}
func (s admissionStream) Replaced()                        {}

// A tick's admissions cost each side two round trips, whatever their number (they cost five
// per user once: owner lookup, dispatch, ack, issue, ack; then four a tick for the dispatcher
// and three a batch for the broker, a closing read each). The dispatcher's tick is the
// promotion script, which also acknowledges the entries the tick before routed and reads the
// entries with their owners, and the dispatch pipeline; the broker's delivery is the blocking
// read that brings the batch and the Issue script, which also acknowledges the batch delivered
// before (a broker with no batch for a tick acknowledges on its own). On one Redis and on a
// Redis Cluster, where each script stays in one hash slot.
func TestPush_TickCostsTwoRoundTripsPerSideWhateverTheAdmissions(t *testing.T) {
	t.Run("redis", func(t *testing.T) { testTickRoundTrips(t, "redis://"+testenv.RedisAddr(t)) })
	t.Run("cluster", func(t *testing.T) { testTickRoundTrips(t, testenv.RedisCluster(t)) })
}

func testTickRoundTrips(t *testing.T, redisURL string) {
	const users = 200 // one batch: under routeBatch
	ctx := context.Background()
	prefix := "rushgate:test:" + uuid.NewString() + ":"
	brokerRoom, _, brokerTrips := countingRoom(t, redisURL, prefix)
	dispatcherRoom, dispatcherClient, dispatcherTrips := countingRoom(t, redisURL, prefix)

	clock := system.Clock{}
	stores := memory.NewStores(memory.NewDatabase())
	coord := memory.NewCoordination(clock)
	g := guard.New(guard.Deps{Idempotency: coord.Idempotency, Locker: coord.Locker, Clock: clock,
		Sleeper: system.Sleeper{}, Tx: stores.Tx, Markers: stores.Markers}, guard.Config{})
	svc := appwaiting.NewService(appwaiting.Deps{Tx: stores.Tx, Events: stores.Events, Seats: stores.Seats,
		Reservations: stores.Reservations, Room: dispatcherRoom, Guard: g, Clock: clock, IDs: system.UUIDs{},
		Rates: appwaiting.NewAdmissionRates()}, appwaiting.Config{})
	const tick = 2 * time.Second
	broker := appwaiting.NewBroker(appwaiting.BrokerDeps{Events: stores.Events, Seats: stores.Seats, Rooms: brokerRoom,
		Queue: brokerRoom, Rates: appwaiting.NewAdmissionRates(), Clock: clock}, "broker-"+uuid.NewString(),
		appwaiting.BrokerConfig{Tick: tick})
	dispatcher := appwaiting.NewDispatcher(appwaiting.DispatcherDeps{Events: stores.Events, Seats: stores.Seats,
		Rooms: dispatcherRoom, Index: dispatcherRoom, Queue: dispatcherRoom, Clock: clock}, "dispatcher-1", appwaiting.DispatcherConfig{})

	admitted := make(chan string, users+1)
	join := func(eventID string, n int) {
		t.Helper()
		for i := range n {
			if _, err := broker.Join(ctx, eventID, fmt.Sprintf("user-%d", i), admissionStream{admitted: admitted}); err != nil {
				t.Fatal(err)
			}
		}
	}
	awaitAdmissions := func(n int) {
		t.Helper()
		timeout := time.After(testenv.DependencyTimeout)
		for range n {
			select {
			case <-admitted:
			case <-timeout:
				t.Fatalf("not every one of %d users was admitted", n)
			}
		}
	}
	createEvent := func(name string, slots int) string {
		t.Helper()
		e, err := svc.CreateEvent(ctx, appwaiting.CreateEventCommand{Name: name, Seats: slots, Slots: slots, Mode: "push"})
		if err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	run := func() (stop func()) {
		runCtx, cancel := context.WithCancel(ctx)
		var running sync.WaitGroup
		running.Go(func() { broker.Run(runCtx) })
		return func() {
			cancel()
			running.Wait()
		}
	}
	streamLength := func(key string) int64 {
		t.Helper()
		n, err := dispatcherClient.XLen(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// deliveryTrips are the broker's round trips less its own tick's (heartbeat, positions).
	deliveryTrips := func(trips []string) []string {
		var out []string
		for _, trip := range trips {
			if trip != "set+sadd" && trip != "snapshot" && trip != "predict" {
				out = append(out, trip)
			}
		}
		return out
	}

	// The scripts are loaded (on every node of a cluster) and a first promotion creates the
	// broker's group, so the measured one does neither.
	for _, script := range []*goredis.Script{readGroupScript, issueScript, promoteScript, snapshotScript, ackScript, predictScript} {
		if err := script.Load(ctx, dispatcherClient).Err(); err != nil {
			t.Fatal(err)
		}
	}
	stop := run()
	warm := createEvent("warm-up", 1)
	join(warm, 1)
	if err := dispatcher.Promote(ctx, warm); err != nil {
		t.Fatal(err)
	}
	awaitAdmissions(1)
	stop()

	// The whole crowd is promoted and dispatched while the broker is not reading, so its next
	// read finds the tick's batch whole, as it does when a tick's dispatch lands between reads.
	eventID := createEvent("crowd", users)
	join(eventID, users)
	dispatcherMark := dispatcherTrips.mark()
	if err := dispatcher.Promote(ctx, eventID); err != nil {
		t.Fatal(err)
	}
	dispatched := dispatcherTrips.since(dispatcherMark)

	brokerTrips.drainBlocks()
	brokerMark := brokerTrips.mark()
	stop = run()
	t.Cleanup(stop)
	brokerTrips.awaitBlock(t) // the read that brings the batch
	awaitAdmissions(users)
	brokerTrips.awaitBlock(t) // waiting again: the delivery is over
	delivered := deliveryTrips(brokerTrips.since(brokerMark))
	t.Logf("%d users: dispatcher round trips %v; broker round trips %v", users, dispatched, delivered)

	if want := []string{"promote", "xadd"}; !slices.Equal(dispatched, want) {
		t.Fatalf("dispatcher's tick: round trips %v, want %v", dispatched, want)
	}
	if want := []string{"block", "issue", "block"}; !slices.Equal(delivered, want) {
		t.Fatalf("broker's delivery: round trips %v, want %v (the last is the next read, waiting)", delivered, want)
	}

	// The next tick's promotion acknowledges the routed entries: the entry stream is empty.
	dispatcherMark = dispatcherTrips.mark()
	if err := dispatcher.Promote(ctx, eventID); err != nil {
		t.Fatal(err)
	}
	if next := dispatcherTrips.since(dispatcherMark); !slices.Equal(next, []string{"promote"}) {
		t.Fatalf("dispatcher's next tick: round trips %v, want the promotion alone", next)
	}
	if n := streamLength(dispatcherRoom.keys(eventID)[6]); n != 0 {
		t.Fatalf("%d entries left after the next tick's promotion", n)
	}
	// A tick without a batch acknowledges the delivered one on its own.
	brokerMark = brokerTrips.mark()
	brokerTrips.awaitBlock(t)
	if idle := deliveryTrips(brokerTrips.since(brokerMark)); !slices.Equal(idle, []string{"ack", "block"}) {
		t.Fatalf("broker's idle tick: round trips %v, want the acknowledgement and the next read", idle)
	}
	if n := streamLength(dispatcherRoom.dispatchKey(broker.ID())); n != 0 {
		t.Fatalf("%d dispatch messages left after the broker's idle tick", n)
	}
}
