package redis

import (
	"context"
	"fmt"
	"net"
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
// one pipeline (its commands joined by "+"). Scripts are named by which of this package's
// scripts they run.
type roundTrips struct {
	mu    sync.Mutex
	trips []string
	// waiting is signalled when a blocking read starts: the broker is idle.
	waiting chan struct{}
}

func newRoundTrips() *roundTrips { return &roundTrips{waiting: make(chan struct{}, 1)} }

var scriptNames = map[string]string{
	readGroupScript.Hash(): "read", issueScript.Hash(): "issue", promoteScript.Hash(): "promote",
	snapshotScript.Hash(): "snapshot",
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

func (r *roundTrips) record(cmds []goredis.Cmder) {
	names := make([]string, 0, len(cmds))
	for _, c := range cmds {
		if n := commandName(c); len(names) == 0 || names[len(names)-1] != n {
			names = append(names, n)
		}
	}
	trip := strings.Join(names, "+")
	r.mu.Lock()
	r.trips = append(r.trips, trip)
	r.mu.Unlock()
	if trip == "block" {
		select {
		case r.waiting <- struct{}{}:
		default:
		}
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

// countingRoom is a waiting room on a client of its own whose round trips are counted.
func countingRoom(t *testing.T, prefix string) (*WaitingRoom, *roundTrips) {
	t.Helper()
	client, err := NewClient("redis://"+testenv.RedisAddr(t), Options{
		DialTimeout: testenv.DependencyTimeout, ReadTimeout: testenv.DependencyTimeout, WriteTimeout: testenv.DependencyTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	trips := newRoundTrips()
	client.AddHook(trips)
	return NewWaitingRoom(client, prefix), trips
}

// admissionStream counts the admissions a connection receives.
type admissionStream struct{ admitted chan<- string }

func (s admissionStream) Position(appwaiting.Position)     {}
func (s admissionStream) Admitted(a appwaiting.Admission)  { s.admitted <- a.Token }
func (s admissionStream) End()                             {}
func (s admissionStream) Prequeue(appwaiting.PrequeueView) {}
func (s admissionStream) SoldOut()                         {}

// Routing and delivering a promotion of many users costs a few round trips, not a few per user
// (it cost five per user: owner lookup, dispatch, ack, issue, ack): the dispatcher's pass is
// the promotion script, then per batch one read (acknowledging the batch before, bringing the
// owners) and one dispatch pipeline, and a closing read; the broker's delivery is per batch one
// read (acknowledging the batch before) and one Issue script, the first batch's read being the
// blocking read it was waiting in.
func TestPush_RoutingAndDeliveryCostRoundTripsPerBatchNotPerUser(t *testing.T) {
	const users = 200
	ctx := context.Background()
	prefix := "rushgate:test:" + uuid.NewString() + ":"
	brokerRoom, brokerTrips := countingRoom(t, prefix)
	dispatcherRoom, dispatcherTrips := countingRoom(t, prefix)

	clock := system.Clock{}
	stores := memory.NewStores(memory.NewDatabase())
	coord := memory.NewCoordination(clock)
	g := guard.New(guard.Deps{Idempotency: coord.Idempotency, Locker: coord.Locker, Clock: clock,
		Sleeper: system.Sleeper{}, Tx: stores.Tx, Markers: stores.Markers}, guard.Config{})
	svc := appwaiting.NewService(appwaiting.Deps{Tx: stores.Tx, Events: stores.Events, Seats: stores.Seats,
		Reservations: stores.Reservations, Room: dispatcherRoom, Guard: g, Clock: clock, IDs: system.UUIDs{},
		Rates: appwaiting.NewAdmissionRates()}, appwaiting.Config{})
	broker := appwaiting.NewBroker(appwaiting.BrokerDeps{Events: stores.Events, Seats: stores.Seats, Rooms: brokerRoom,
		Queue: brokerRoom, Rates: appwaiting.NewAdmissionRates(), Clock: clock}, "broker-"+uuid.NewString(),
		appwaiting.BrokerConfig{Tick: 2 * time.Second})
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
	// awaitIdle waits for the broker's next blocking read: its delivery is over.
	awaitIdle := func() {
		t.Helper()
		select {
		case <-brokerTrips.waiting:
		case <-time.After(testenv.DependencyTimeout):
			t.Fatal("the broker never went back to waiting on its dispatch stream")
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

	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	running.Go(func() { broker.Run(runCtx) })
	t.Cleanup(func() {
		stop()
		running.Wait()
	})

	// A first promotion loads the scripts, so the measured one runs none of them twice.
	warm := createEvent("warm-up", 1)
	join(warm, 1)
	if err := dispatcher.Promote(ctx, warm); err != nil {
		t.Fatal(err)
	}
	awaitAdmissions(1)

	eventID := createEvent("crowd", users)
	join(eventID, users)
	awaitIdle()
	brokerMark, dispatcherMark := brokerTrips.mark(), dispatcherTrips.mark()
	if err := dispatcher.Promote(ctx, eventID); err != nil {
		t.Fatal(err)
	}
	dispatched := dispatcherTrips.since(dispatcherMark)
	awaitAdmissions(users)
	awaitIdle()
	delivered := brokerTrips.since(brokerMark)
	t.Logf("%d users: dispatcher round trips %v; broker round trips %v", users, dispatched, delivered)

	if want := []string{"promote", "read", "xadd", "read"}; strings.Join(dispatched, " ") != strings.Join(want, " ") {
		t.Fatalf("dispatcher round trips %v, want %v", dispatched, want)
	}
	// The broker's own tick (heartbeat, positions) may fall in the window; it is no delivery.
	reads, issues := 0, 0
	for _, trip := range delivered {
		switch trip {
		case "read", "block":
			reads++
		case "issue":
			issues++
		case "set+sadd", "snapshot":
		default:
			t.Fatalf("broker round trip %q is not part of a delivery", trip)
		}
	}
	// Every batch is one read and one Issue; the last read acknowledges and finds nothing, and
	// the broker waits again. The dispatch pipeline may wake it before all 200 are appended, so
	// a few batches, never one per user.
	if issues < 1 || issues > 4 || reads > issues+2 {
		t.Fatalf("broker: %d reads and %d Issue scripts for %d users, want one of each per batch", reads, issues, users)
	}
}
