package telemetry_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/memory/memorytest"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/adapters/telemetry"
	"github.com/rushgate/rushgate/application/waiting"
	"github.com/rushgate/rushgate/ports"
)

// recordEverything records into every collector, for event.
func recordEverything(m *telemetry.Metrics, push *telemetry.PushMetrics, event string) {
	m.ObserveRequest("POST", "/crews", 201, time.Millisecond)
	m.LockAcquired("crew:c1", 2, time.Millisecond)
	m.LockExhausted("crew:c1")
	m.Queued("crew:c1", 3)
	m.BatchServed("crew:c1", 3)
	m.Replayed()
	m.OutboxCounted(2, 1)
	m.OutboxGaveUp()
	m.RoomObserved(event, ports.RoomStats{Waiting: 4, Admitted: 1, Claims: 7, Expired: 2, Dropped: 3})
	push.Promoted(event, 2, time.Millisecond)
	push.PromotionBacklog(1)
	push.Connections(event, 5)
	push.Broadcast(event, time.Millisecond)
	push.Delivered(event)
	push.BrokerLapsed(1)
	push.BrokerReaped(1)
	push.EntriesReclaimed(event, 1)
	push.DispatcherStalled(time.Second)
	push.DispatcherTicked()
	push.BrokerBeat()
}

// eventSeries counts the series labelled event="id" in the exposition.
func eventSeries(t *testing.T, reg *prometheus.Registry, id string) int {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	n := 0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "event" && l.GetValue() == id {
					n++
				}
			}
		}
	}
	return n
}

func TestMetrics_NamesFollowPrometheusConventions(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := telemetry.NewMetrics(reg)
	recordEverything(m, telemetry.NewPushMetrics(reg, m), "e1")

	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems, "counters end in _total, nothing else does, units are base units")

	// The waiting room's store counters are counters, so rate() applies.
	families, err := reg.Gather()
	require.NoError(t, err)
	types := make(map[string]string)
	for _, f := range families {
		types[f.GetName()] = f.GetType().String()
	}
	for _, name := range []string{"rushgate_queue_claims_total", "rushgate_queue_expired_reconciled_total", "rushgate_queue_dropped_idle_total"} {
		assert.Equal(t, "COUNTER", types[name], name)
	}
	assert.Equal(t, "GAUGE", types["rushgate_queue_waiting"])

	// The liveness timestamps the alerts age are the wall clock's.
	for _, f := range families {
		if strings.HasSuffix(f.GetName(), "_timestamp_seconds") {
			at := time.Unix(int64(f.GetMetric()[0].GetGauge().GetValue()), 0)
			assert.WithinDuration(t, time.Now(), at, time.Minute, f.GetName())
		}
	}
}

// The waiting gauge counts a pre-queue's users with the queue's: both are the line.
func TestRoomObserved_WaitingCountsThePrequeue(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := telemetry.NewMetrics(reg)
	m.RoomObserved("sale", ports.RoomStats{Waiting: 2, Prequeued: 5})
	want := "# HELP rushgate_queue_waiting Users waiting in an event's queue or pre-queue.\n" +
		"# TYPE rushgate_queue_waiting gauge\n" + `rushgate_queue_waiting{event="sale"} 7` + "\n"
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "rushgate_queue_waiting"))
}

func TestRoomsInUse_DropsTheSeriesOfEventsNoLongerInUse(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := telemetry.NewMetrics(reg)
	push := telemetry.NewPushMetrics(reg, m)
	recordEverything(m, push, "gone")
	recordEverything(m, push, "kept")
	// rooms: waiting, admitted, claims, expired, dropped; push: promotions, connections,
	// admissions delivered, entries reclaimed.
	const perEvent = 9
	require.Equal(t, perEvent, eventSeries(t, reg, "gone"))

	// A broker's last connection to an event takes the event's connection gauge with it.
	push.Connections("gone", 0)
	assert.Equal(t, perEvent-1, eventSeries(t, reg, "gone"))

	m.RoomsInUse([]string{"kept"})
	// The room's numbers go at once; the push counters stay one more pass, as an event that
	// comes into use while a pass runs would record before the pass lists it.
	assert.Equal(t, 3, eventSeries(t, reg, "gone"), "promotions, deliveries and reclaimed entries stay one pass")
	m.RoomsInUse([]string{"kept"})
	assert.Zero(t, eventSeries(t, reg, "gone"))
	assert.Equal(t, perEvent, eventSeries(t, reg, "kept"))

	// An event back in use between two passes keeps its counters.
	push.Delivered("back")
	m.RoomsInUse([]string{"kept"})
	m.RoomsInUse([]string{"kept", "back"})
	m.RoomsInUse([]string{"kept"})
	assert.Equal(t, 1, eventSeries(t, reg, "back"))
}

// TestScrape_SeriesOfIdleEventsAreGone runs the waiting rooms on the memory adapters with the
// metrics as their observer: six events with waiting users are exported, and once their users
// went idle and the reconciliation passes ran, /metrics names none of them.
func TestScrape_SeriesOfIdleEventsAreGone(t *testing.T) {
	ctx := context.Background()
	env := memorytest.New()
	clock, stores := env.FakeClock, env.Stores
	reg := prometheus.NewRegistry()
	metrics := telemetry.NewMetrics(reg)
	rooms := waiting.NewService(waiting.Deps{Tx: stores.Tx, Events: stores.Events, Seats: stores.Seats,
		Reservations: stores.Reservations, Room: env.Coord.WaitingRoom, Guard: env.Guard, Clock: clock, IDs: system.UUIDs{},
		Observer: metrics}, waiting.Config{IdleTimeout: time.Minute})
	server := httptest.NewServer(metrics.Handler())
	defer server.Close()
	scrape := func() string {
		res, err := server.Client().Get(server.URL)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return string(body)
	}

	var events []string
	for i := range 6 {
		e, err := rooms.CreateEvent(ctx, waiting.CreateEventCommand{Name: fmt.Sprint("show ", i), Seats: 5, Slots: 1, Mode: "pull"})
		require.NoError(t, err)
		events = append(events, e.ID)
		for u := range 3 {
			_, _, err := rooms.Enter(ctx, e.ID, fmt.Sprint("user", u))
			require.NoError(t, err)
		}
		_, _, err = rooms.Claim(ctx, e.ID, "user0")
		require.NoError(t, err)
	}
	require.NoError(t, rooms.Reconcile(ctx))
	exposition := scrape()
	for _, id := range events {
		assert.Contains(t, exposition, fmt.Sprintf(`rushgate_queue_waiting{event=%q} 2`, id))
		assert.Contains(t, exposition, fmt.Sprintf(`rushgate_queue_claims_total{event=%q} 1`, id))
	}

	// Past the idle timeout and the tokens' expiry, a pass drops the waiting users and gives
	// the slots back: the rooms leave use, and the next pass forgets them.
	clock.Advance(time.Hour)
	require.NoError(t, rooms.Reconcile(ctx))
	require.NoError(t, rooms.Reconcile(ctx))
	exposition = scrape()
	for _, id := range events {
		assert.NotContains(t, exposition, id)
	}
	assert.NotContains(t, exposition, `event="`)
	assert.Contains(t, exposition, "rushgate_outbox_pending 0", "the rest is still exported")
}
