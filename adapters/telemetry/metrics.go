// Package telemetry holds what operations watch, independent of any transport: the Prometheus
// collectors (request latency, the guard's lock waits, batches and replays) and the readiness
// checks of the dependencies. The HTTP server exposes them, and a background worker running
// without it records into the same collectors.
package telemetry

import (
	"context"
	stdhttp "net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/relay"
	"github.com/rushgate/rushgate/application/waiting"
	"github.com/rushgate/rushgate/ports"
)

var (
	_ guard.Observer   = (*Metrics)(nil)
	_ waiting.Observer = (*Metrics)(nil)
	_ relay.Observer   = (*Metrics)(nil)
)

// Metrics holds the server's Prometheus collectors: request latency, and the guard's lock waits,
// lock attempts, lock exhaustion, batch sizes and idempotency replays (it is the guard's
// Observer).
type Metrics struct {
	gatherer       prometheus.Gatherer
	requests       *prometheus.HistogramVec
	lockWait       *prometheus.HistogramVec
	lockAttempts   *prometheus.HistogramVec
	lockExhausted  *prometheus.CounterVec
	batchSize      *prometheus.HistogramVec
	queueLength    *prometheus.HistogramVec
	idempotentHits prometheus.Counter
	// The waiting rooms, per event, and the other series labelled by event: both last only
	// while the event's room is in use.
	rooms    *roomCollector
	perEvent eventSeries
	// The outbox, as the last relay round counted it, and the messages given up on.
	outboxPending, outboxFailed prometheus.Gauge
	outboxGaveUp                prometheus.Counter
	// When the last relay round of this instance completed: an alert on its age finds a stalled
	// relay.
	outboxLastRound prometheus.Gauge
	// Reads meant for a read replica that the primary served because the replica failed.
	replicaFallbacks prometheus.Counter
	// The signed wait errors of admissions (actual − first estimate), every event together.
	waitErrors prometheus.Histogram
	// How late after their opensAt this instance opened pre-queues.
	prequeueOpening prometheus.Histogram
	// Whether each Redis master's maxmemory-policy, read at start, keeps every key (1) or may
	// evict some (0); a master whose policy could not be read has no series.
	redisEvictionSafe *prometheus.GaugeVec
	// How far Redis's clock is ahead of this instance's; no series without Redis.
	clockOffset *prometheus.GaugeVec
	// requestSeries caches the children of requests: a label lookup hashes the values and
	// formats the status on every request. Routes are templates and methods folded, so it stays
	// small.
	requestSeries sync.Map // requestLabels → prometheus.Observer
}

// NewMetrics creates the collectors and registers them on reg; it panics if one is already
// registered there, as prometheus.MustRegister does. Handler serves what reg gathers when reg is
// also a prometheus.Gatherer (a *prometheus.Registry is both), else prometheus.DefaultGatherer.
// Process and Go runtime collectors are the caller's choice to register.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	gatherer, ok := reg.(prometheus.Gatherer)
	if !ok {
		gatherer = prometheus.DefaultGatherer
	}
	m := &Metrics{
		gatherer: gatherer,
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "rushgate",
			Name:      "http_request_duration_seconds",
			Help:      "HTTP request latency by method, route template and status.",
			Buckets:   prometheus.DefBuckets,
		}, []string{"method", "route", "status"}),
		lockWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "rushgate",
			Name:      "lock_wait_seconds",
			Help:      "Backoff time spent waiting before a distributed lock was acquired, by lock kind.",
			Buckets:   []float64{0, 0.1, 0.25, 0.5, 1, 2, 4},
		}, []string{"lock"}),
		lockAttempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "rushgate",
			Name:      "lock_attempts",
			Help:      "Attempts needed to acquire a distributed lock, by lock kind.",
			Buckets:   []float64{1, 2, 3, 4, 5, 6},
		}, []string{"lock"}),
		lockExhausted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rushgate",
			Name:      "lock_exhausted_total",
			Help:      "Requests answered 429 because a distributed lock stayed busy through every retry, by lock kind.",
		}, []string{"lock"}),
		batchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "rushgate",
			Name:      "lock_batch_size",
			Help:      "Requests served by one lock hold (combining), by lock kind.",
			Buckets:   []float64{1, 2, 4, 8, 16, 32, 64, 128},
		}, []string{"lock"}),
		queueLength: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "rushgate",
			Name:      "lock_queue_length",
			Help:      "Requests queued in this instance for one lock key, seen by each arriving request, by lock kind.",
			Buckets:   []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}, []string{"lock"}),
		idempotentHits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "rushgate",
			Name:      "idempotency_replays_total",
			Help:      "Requests answered from a stored idempotent response.",
		}),
	}
	m.rooms = newRoomCollector()
	m.outboxPending = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "rushgate", Name: "outbox_pending",
		Help: "Outbox messages waiting to be delivered, as the last relay round counted them."})
	m.outboxFailed = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "rushgate", Name: "outbox_failed",
		Help: "Outbox messages given up on (FAILED), as the last relay round counted them."})
	m.outboxGaveUp = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "rushgate", Name: "outbox_gave_up_total",
		Help: "Outbox messages this instance turned FAILED after every retry."})
	m.outboxLastRound = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "rushgate", Name: "outbox_relay_last_round_timestamp_seconds",
		Help: "Unix time of this instance's last relay round that sent every due message and counted the outbox."})
	m.replicaFallbacks = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "rushgate", Name: "db_replica_fallbacks_total",
		Help: "Reads meant for a database read replica that the primary served, because the replica failed one or was skipped after failing."})
	m.waitErrors = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "rushgate", Name: "queue_wait_error_seconds",
		Help:    "Admitted users' actual wait minus the first wait estimate they were given (negative: earlier than told).",
		Buckets: []float64{-600, -300, -120, -60, -30, -10, -5, -1, 1, 5, 10, 30, 60, 120, 300, 600}})
	m.prequeueOpening = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "rushgate", Name: "prequeue_opening_seconds",
		Help:    "From a pre-queue's opensAt to its room opening with every pre-queued user placed, for the pre-queues this instance opened.",
		Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60}})
	m.redisEvictionSafe = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "rushgate", Name: "redis_eviction_policy_safe",
		Help: "1 if the Redis master's maxmemory-policy, read at start and every minute, is noeviction; 0 if it may evict locks, idempotency records or waiting-room keys."},
		[]string{"node", "policy"})
	// No labels, but a vector, so that there is no series until an offset is measured.
	m.clockOffset = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "rushgate", Name: "clock_offset_seconds",
		Help: "How far Redis's clock (TIME) is ahead of this instance's own, as last measured (every 10 s): the instance's times follow Redis's."},
		nil)
	reg.MustRegister(m.outboxPending, m.outboxFailed, m.outboxGaveUp, m.outboxLastRound, m.replicaFallbacks, m.waitErrors,
		m.prequeueOpening, m.redisEvictionSafe, m.clockOffset)
	reg.MustRegister(m.requests, m.lockWait, m.lockAttempts, m.lockExhausted, m.batchSize, m.queueLength, m.idempotentHits,
		m.rooms)
	return m
}

// Handler serves the gathered metrics in the Prometheus exposition format.
func (m *Metrics) Handler() stdhttp.Handler {
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{})
}

// LockAcquired records how long and how many attempts taking a lock needed.
func (m *Metrics) LockAcquired(lockKey string, attempts int, waited time.Duration) {
	kind := lockKind(lockKey)
	m.lockWait.WithLabelValues(kind).Observe(waited.Seconds())
	m.lockAttempts.WithLabelValues(kind).Observe(float64(attempts))
}

// LockExhausted counts a lock given up on after every retry.
func (m *Metrics) LockExhausted(lockKey string) {
	m.lockExhausted.WithLabelValues(lockKind(lockKey)).Inc()
}

// Queued records how long a lock key's queue is when a request joins it.
func (m *Metrics) Queued(lockKey string, length int) {
	m.queueLength.WithLabelValues(lockKind(lockKey)).Observe(float64(length))
}

// BatchServed records how many requests one lock hold served.
func (m *Metrics) BatchServed(lockKey string, size int) {
	m.batchSize.WithLabelValues(lockKind(lockKey)).Observe(float64(size))
}

// RoomObserved records an event's waiting-room numbers after a reconciliation pass.
func (m *Metrics) RoomObserved(eventID string, s ports.RoomStats) { m.rooms.observe(eventID, s) }

// WaitErrorsObserved records admissions' wait errors.
func (m *Metrics) WaitErrorsObserved(_ string, errs []time.Duration) {
	for _, e := range errs {
		m.waitErrors.Observe(e.Seconds())
	}
}

// PrequeueOpened records how late after opensAt this instance opened a pre-queue.
func (m *Metrics) PrequeueOpened(_ string, late time.Duration) {
	m.prequeueOpening.Observe(late.Seconds())
}

// RoomsInUse drops the series of the events no longer in use (ended, or idle: nobody waiting
// or admitted), so there are as many per-event series as events in use, however many came and
// went: the waiting-room numbers at once, the push mode's counters once the event was missing
// from two passes in a row.
func (m *Metrics) RoomsInUse(eventIDs []string) {
	inUse := make(map[string]struct{}, len(eventIDs))
	for _, id := range eventIDs {
		inUse[id] = struct{}{}
	}
	m.rooms.keepOnly(inUse)
	m.perEvent.keepOnly(inUse)
}

// OutboxCounted records the outbox's PENDING and FAILED messages at the end of a round.
func (m *Metrics) OutboxCounted(pending, failed int) {
	m.outboxPending.Set(float64(pending))
	m.outboxFailed.Set(float64(failed))
	m.outboxLastRound.SetToCurrentTime()
}

// OutboxGaveUp counts a message turned FAILED.
func (m *Metrics) OutboxGaveUp() { m.outboxGaveUp.Inc() }

// ReplicaFellBack counts a read meant for a read replica that the primary served.
func (m *Metrics) ReplicaFellBack() { m.replicaFallbacks.Inc() }

// RedisEvictionPolicyRead records a Redis master's maxmemory-policy and whether it keeps every key.
func (m *Metrics) RedisEvictionPolicyRead(node, policy string, safe bool) {
	value := 0.0
	if safe {
		value = 1
	}
	m.redisEvictionSafe.WithLabelValues(node, policy).Set(value)
}

// RedisEvictionPolicyGone drops the series of a policy a Redis master no longer has, or of a
// master no longer written to.
func (m *Metrics) RedisEvictionPolicyGone(node, policy string) {
	m.redisEvictionSafe.DeleteLabelValues(node, policy)
}

// ClockOffset records how far Redis's clock is ahead of this instance's.
func (m *Metrics) ClockOffset(offset time.Duration) {
	m.clockOffset.WithLabelValues().Set(offset.Seconds())
}

// Replayed counts an idempotent replay.
func (m *Metrics) Replayed() { m.idempotentHits.Inc() }

// requestLabels are the labels of one request series.
type requestLabels struct {
	method, route string
	status        int
}

// ObserveRequest records one answered request.
func (m *Metrics) ObserveRequest(method, route string, status int, latency time.Duration) {
	labels := requestLabels{method: method, route: route, status: status}
	series, ok := m.requestSeries.Load(labels)
	if !ok {
		series, _ = m.requestSeries.LoadOrStore(labels, m.requests.WithLabelValues(method, route, strconv.Itoa(status)))
	}
	series.(prometheus.Observer).Observe(latency.Seconds())
}

// lockKind is the part of a lock key before its ids ("crew" for "crew:{crewId}"), so the label
// set stays bounded however many crews exist.
func lockKind(lockKey string) string {
	kind, _, _ := strings.Cut(lockKey, ":")
	return kind
}

// ReadinessCheck is one dependency a readiness probe checks, such as "database" or "redis".
type ReadinessCheck struct {
	Name  string
	Check func(ctx context.Context) error
}
