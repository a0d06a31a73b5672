package waiting

import (
	"math"
	"time"
)

// Bounds of the wait estimate.
const (
	// RateWindow is how far back the admission rate looks: with no admission in it the rate,
	// and so the estimate, is unknown.
	RateWindow = 60 * time.Second
	// MaxEstimatedWait caps an estimate: a longer one says nothing a person can use.
	MaxEstimatedWait = 24 * time.Hour
)

// AdmissionRate measures an event's admissions per second over the last RateWindow, from
// samples of the store's running admission count. The zero value has seen nothing. It is not
// safe for concurrent use.
type AdmissionRate struct {
	samples []admissionSample // oldest first, each newer and none lower than the one before
}

type admissionSample struct {
	at         time.Time
	admissions int64
}

// Observe records that admissions had happened by at. A sample no newer than the last is
// ignored; a count lower than the last (the store's room was lost and opened again) starts the
// measurement over.
func (r *AdmissionRate) Observe(admissions int64, at time.Time) {
	if n := len(r.samples); n > 0 {
		last := r.samples[n-1]
		if !at.After(last.at) {
			return
		}
		if admissions < last.admissions {
			r.samples = r.samples[:0]
		}
	}
	r.samples = append(r.inWindow(at), admissionSample{at: at, admissions: admissions})
}

// inWindow drops the samples older than RateWindow before now and answers the rest.
func (r *AdmissionRate) inWindow(now time.Time) []admissionSample {
	from := now.Add(-RateWindow)
	i := 0
	for i < len(r.samples) && r.samples[i].at.Before(from) {
		i++
	}
	r.samples = append(r.samples[:0], r.samples[i:]...)
	return r.samples
}

// PerSecond is the rate over the samples within RateWindow before now: the admissions between
// the oldest and the newest over the time between them. ok is false with fewer than two such
// samples; a window without admissions is a known rate of 0.
func (r *AdmissionRate) PerSecond(now time.Time) (perSecond float64, ok bool) {
	samples := r.inWindow(now)
	if len(samples) < 2 {
		return 0, false
	}
	oldest, newest := samples[0], samples[len(samples)-1]
	return float64(newest.admissions-oldest.admissions) / newest.at.Sub(oldest.at).Seconds(), true
}

// EstimateWait is how long ahead admissions take at perSecond, in whole seconds rounded up and
// at most MaxEstimatedWait. Nobody ahead is a wait of 0 whatever the rate; otherwise ok is
// false unless perSecond is a positive number, since without admissions no wait follows.
func EstimateWait(ahead int, perSecond float64) (seconds int, ok bool) {
	if ahead <= 0 {
		return 0, true
	}
	if !(perSecond > 0) || math.IsInf(perSecond, 1) {
		return 0, false
	}
	// Compared as floats before any conversion: a quotient beyond int's range (a huge line, a
	// tiny rate, an infinity) converts to nonsense, so it is capped first.
	wait := math.Ceil(float64(ahead) / perSecond)
	if limit := MaxEstimatedWait.Seconds(); wait > limit {
		return int(limit), true
	}
	return int(wait), true
}
