package telemetry

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/rushgate/rushgate/ports"
)

// roomCollector exports each event's waiting-room numbers as the last reconciliation pass read
// them from the shared store: the queue and the admitted users as gauges, and the store's own
// counters (admissions, expired tokens, idle drops since the room opened) as counters, so
// rate() works on them. Every instance reports the same deployment-wide values.
type roomCollector struct {
	waiting, admitted, claims, expired, dropped *prometheus.Desc

	mu     sync.Mutex
	events map[string]ports.RoomStats
}

func newRoomCollector() *roomCollector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("rushgate", "", name), help, []string{"event"}, nil)
	}
	return &roomCollector{
		waiting:  desc("queue_waiting", "Users waiting in an event's queue or pre-queue."),
		admitted: desc("queue_admitted", "Users holding a live entry token of an event."),
		claims:   desc("queue_claims_total", "Entry tokens claimed for an event since its room opened (admissions)."),
		expired:  desc("queue_expired_reconciled_total", "Entry tokens of an event that expired and gave their slot back, since its room opened."),
		dropped:  desc("queue_dropped_idle_total", "Waiting users of an event dropped for not polling, since its room opened."),
		events:   make(map[string]ports.RoomStats),
	}
}

func (c *roomCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.waiting, c.admitted, c.claims, c.expired, c.dropped} {
		ch <- d
	}
}

func (c *roomCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, s := range c.events {
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(s.InLine()), id)
		ch <- prometheus.MustNewConstMetric(c.admitted, prometheus.GaugeValue, float64(s.Admitted), id)
		ch <- prometheus.MustNewConstMetric(c.claims, prometheus.CounterValue, float64(s.Claims), id)
		ch <- prometheus.MustNewConstMetric(c.expired, prometheus.CounterValue, float64(s.Expired), id)
		ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(s.Dropped), id)
	}
}

func (c *roomCollector) observe(eventID string, s ports.RoomStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events[eventID] = s
}

// keepOnly forgets every event not in inUse.
func (c *roomCollector) keepOnly(inUse map[string]struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.events {
		if _, ok := inUse[id]; !ok {
			delete(c.events, id)
		}
	}
}

// eventSeries are the collectors outside the room collector with an "event" label (the push
// mode's promotions, deliveries and reclaimed entries), whose series go when the event's room
// is no longer in use.
type eventSeries struct {
	mu   sync.Mutex
	vecs []*prometheus.MetricVec
	// absent are the events that had series but were not in use at the last pass. A series is
	// dropped only when its event is missing from two passes in a row: an event that comes into
	// use while a pass runs records before the pass reports it, and keeps its series.
	absent map[string]struct{}
}

func (e *eventSeries) add(vecs ...*prometheus.MetricVec) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.vecs = append(e.vecs, vecs...)
}

// keepOnly drops the series of the events with series that were not in inUse at this pass nor
// at the one before.
func (e *eventSeries) keepOnly(inUse map[string]struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	absent := make(map[string]struct{})
	for _, vec := range e.vecs {
		for _, id := range eventLabels(vec) {
			if _, ok := inUse[id]; !ok {
				absent[id] = struct{}{}
			}
		}
	}
	for id := range absent {
		if _, before := e.absent[id]; !before {
			continue
		}
		for _, vec := range e.vecs {
			vec.DeletePartialMatch(prometheus.Labels{"event": id})
		}
		delete(absent, id)
	}
	e.absent = absent
}

// eventLabels lists the values of the "event" label among vec's series.
func eventLabels(vec *prometheus.MetricVec) []string {
	ch := make(chan prometheus.Metric)
	go func() {
		vec.Collect(ch)
		close(ch)
	}()
	var ids []string
	for m := range ch {
		var out dto.Metric
		if m.Write(&out) != nil {
			continue
		}
		for _, l := range out.GetLabel() {
			if l.GetName() == "event" {
				ids = append(ids, l.GetValue())
			}
		}
	}
	return ids
}
