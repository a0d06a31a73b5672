package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rushgate/rushgate/application/waiting"
)

var _ waiting.PushObserver = (*PushMetrics)(nil)

// PushMetrics are the push mode's collectors: promotions and the
// promotion script's time, the promotion pool's backlog, this instance's SSE connections per
// event, position broadcast latency and admissions delivered; and the stalls: broker lapses and
// the streams they ended, brokers reaped, entries reclaimed from a stalled dispatcher, and
// dispatcher stalls. Scraped per instance, so the instance label comes from the scrape target.
type PushMetrics struct {
	promotions   *prometheus.CounterVec
	scriptTime   prometheus.Histogram
	backlog      prometheus.Gauge
	connections  *prometheus.GaugeVec
	broadcast    prometheus.Histogram
	delivered    *prometheus.CounterVec
	lapses       prometheus.Counter
	lapseEnded   prometheus.Counter
	reaped       prometheus.Counter
	reapedSlots  prometheus.Counter
	reclaimed    *prometheus.CounterVec
	dispatchStop prometheus.Counter
	// When this process's dispatcher last ticked through every event, and its broker's heartbeat
	// last reached Redis: an alert on their age finds a role that is missing or stuck.
	lastTick, lastBeat prometheus.Gauge
}

// NewPushMetrics creates the push collectors and registers them on reg (panicking on a clash,
// as prometheus.MustRegister does). Their per-event counters last as long as rooms reports the
// event in use (Metrics.RoomsInUse).
func NewPushMetrics(reg prometheus.Registerer, rooms *Metrics) *PushMetrics {
	m := &PushMetrics{
		promotions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "rushgate", Name: "queue_promotions_total",
			Help: "Users promoted from an event's queue by the dispatcher (rate() gives promotions/s)."}, []string{"event"}),
		scriptTime: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "rushgate", Name: "queue_promotion_script_seconds",
			Help: "Time of one promotion script (Lua on Redis) for one event.", Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "rushgate", Name: "queue_promotion_backlog",
			Help: "Events waiting for a promotion worker of this dispatcher."}),
		connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "rushgate", Name: "sse_connections",
			Help: "SSE connections this broker holds, by event."}, []string{"event"}),
		broadcast: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "rushgate", Name: "queue_broadcast_seconds",
			Help: "Time from a tick to the last local connection of an event handed its position.", Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5}}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "rushgate", Name: "queue_admissions_delivered_total",
			Help: "Entry tokens handed to SSE connections by this broker."}, []string{"event"}),
	}
	m.lapses = counter("queue_broker_lapses_total",
		"Times this broker found its heartbeat had lapsed (a stall past the heartbeat timeout, or no heartbeat reaching Redis) and ended its SSE streams so their clients reconnect.")
	m.lapseEnded = counter("queue_broker_lapse_streams_ended_total", "SSE streams this broker ended because its heartbeat had lapsed.")
	m.reaped = counter("queue_brokers_reaped_total", "Dead brokers this dispatcher reaped.")
	m.reapedSlots = counter("queue_brokers_reaped_slots_total", "Slots given back by reaping dead brokers.")
	m.reclaimed = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "rushgate", Name: "queue_entries_reclaimed_total",
		Help: "Entry messages this dispatcher routed after they were left unacknowledged past the heartbeat timeout (a stalled or dead dispatcher)."}, []string{"event"})
	m.dispatchStop = counter("queue_dispatcher_stalls_total", "Times this dispatcher ticked again after a gap longer than the heartbeat timeout.")
	m.lastTick = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "rushgate", Name: "queue_dispatcher_last_tick_timestamp_seconds",
		Help: "Unix time of this dispatcher's last tick that went through every event without an error."})
	m.lastBeat = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "rushgate", Name: "queue_broker_last_heartbeat_timestamp_seconds",
		Help: "Unix time of this broker's last heartbeat that reached Redis."})
	rooms.perEvent.add(m.promotions.MetricVec, m.delivered.MetricVec, m.reclaimed.MetricVec)
	reg.MustRegister(m.promotions, m.scriptTime, m.backlog, m.connections, m.broadcast, m.delivered,
		m.lapses, m.lapseEnded, m.reaped, m.reapedSlots, m.reclaimed, m.dispatchStop,
		m.lastTick, m.lastBeat)
	return m
}

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "rushgate", Name: name, Help: help})
}

// Promoted records one promotion script.
func (m *PushMetrics) Promoted(eventID string, n int, took time.Duration) {
	m.promotions.WithLabelValues(eventID).Add(float64(n))
	m.scriptTime.Observe(took.Seconds())
}

// PromotionBacklog records the pool's backlog.
func (m *PushMetrics) PromotionBacklog(n int) { m.backlog.Set(float64(n)) }

// Connections records this broker's connections to an event; the event's series goes with its
// last connection.
func (m *PushMetrics) Connections(eventID string, n int) {
	if n == 0 {
		m.connections.DeleteLabelValues(eventID)
		return
	}
	m.connections.WithLabelValues(eventID).Set(float64(n))
}

// Broadcast records one event's broadcast latency.
func (m *PushMetrics) Broadcast(_ string, took time.Duration) { m.broadcast.Observe(took.Seconds()) }

// Delivered counts an entry token handed to a connection.
func (m *PushMetrics) Delivered(eventID string) { m.delivered.WithLabelValues(eventID).Inc() }

// BrokerLapsed counts a lapse and the streams it ended.
func (m *PushMetrics) BrokerLapsed(streams int) {
	m.lapses.Inc()
	m.lapseEnded.Add(float64(streams))
}

// BrokerReaped counts a reaped broker and the slots it gave back.
func (m *PushMetrics) BrokerReaped(slots int) {
	m.reaped.Inc()
	m.reapedSlots.Add(float64(slots))
}

// EntriesReclaimed counts entries routed after a stalled or dead dispatcher left them.
func (m *PushMetrics) EntriesReclaimed(eventID string, n int) {
	m.reclaimed.WithLabelValues(eventID).Add(float64(n))
}

// DispatcherStalled counts a stall of this dispatcher.
func (m *PushMetrics) DispatcherStalled(time.Duration) { m.dispatchStop.Inc() }

// DispatcherTicked records a complete tick's time.
func (m *PushMetrics) DispatcherTicked() { m.lastTick.SetToCurrentTime() }

// BrokerBeat records a heartbeat's time.
func (m *PushMetrics) BrokerBeat() { m.lastBeat.SetToCurrentTime() }
