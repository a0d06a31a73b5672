package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rushgate/rushgate/application/waiting"
)

var _ waiting.PushObserver = (*PushMetrics)(nil)

// PushMetrics are the push mode's collectors (the seed's monitoring list): promotions and the
// promotion script's time, the promotion pool's backlog, this instance's SSE connections per
// event, position broadcast latency and admissions delivered. Scraped per instance, so the
// instance label comes from the scrape target.
type PushMetrics struct {
	promotions  *prometheus.CounterVec
	scriptTime  prometheus.Histogram
	backlog     prometheus.Gauge
	connections *prometheus.GaugeVec
	broadcast   prometheus.Histogram
	delivered   *prometheus.CounterVec
}

// NewPushMetrics creates the push collectors and registers them on reg (panicking on a clash,
// as prometheus.MustRegister does).
func NewPushMetrics(reg prometheus.Registerer) *PushMetrics {
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
	reg.MustRegister(m.promotions, m.scriptTime, m.backlog, m.connections, m.broadcast, m.delivered)
	return m
}

// Promoted records one promotion script.
func (m *PushMetrics) Promoted(eventID string, n int, took time.Duration) {
	m.promotions.WithLabelValues(eventID).Add(float64(n))
	m.scriptTime.Observe(took.Seconds())
}

// PromotionBacklog records the pool's backlog.
func (m *PushMetrics) PromotionBacklog(n int) { m.backlog.Set(float64(n)) }

// Connections records this broker's connections to an event.
func (m *PushMetrics) Connections(eventID string, n int) {
	m.connections.WithLabelValues(eventID).Set(float64(n))
}

// Broadcast records one event's broadcast latency.
func (m *PushMetrics) Broadcast(_ string, took time.Duration) { m.broadcast.Observe(took.Seconds()) }

// Delivered counts an entry token handed to a connection.
func (m *PushMetrics) Delivered(eventID string) { m.delivered.WithLabelValues(eventID).Inc() }
