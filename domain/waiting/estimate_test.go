package waiting_test

import (
	"math"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain/waiting"
)

func TestEstimateWait_IsWholeSecondsWithinADayOrUnknown(t *testing.T) {
	day := int(waiting.MaxEstimatedWait.Seconds())
	cases := []struct {
		name      string
		ahead     int
		perSecond float64
		want      int
		known     bool
	}{
		{"nobody ahead needs no rate", 0, 0, 0, true},
		{"nobody ahead at any rate", 0, 3, 0, true},
		{"no admissions: unknown", 5, 0, 0, false},
		{"negative rate: unknown", 5, -2, 0, false},
		{"not a number: unknown", 5, math.NaN(), 0, false},
		{"infinite rate: unknown", 5, math.Inf(1), 0, false},
		{"exact", 4, 2, 2, true},
		{"rounded up", 5, 2, 3, true},
		{"a fraction of a second is a second", 1, 1000, 1, true},
		{"slow rate", 3, 0.1, 30, true},
		{"just under a day", day - 1, 1, day - 1, true},
		{"a day", day, 1, day, true},
		{"over a day is capped", day + 1, 1, day, true},
		{"huge rank", math.MaxInt, 500, day, true},
		{"tiny rate", 1, 1e-300, day, true},
		{"smallest rate: the quotient overflows to infinity", math.MaxInt, math.SmallestNonzeroFloat64, day, true},
		{"rate that halved sixty times", 1, 0.5 / (1 << 60), day, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, known := waiting.EstimateWait(c.ahead, c.perSecond)
			if got != c.want || known != c.known {
				t.Fatalf("EstimateWait(%d, %g) = %d, %v; want %d, %v", c.ahead, c.perSecond, got, known, c.want, c.known)
			}
			if got < 0 || got > day {
				t.Fatalf("estimate %d outside 0..%d", got, day)
			}
		})
	}
}

func TestAdmissionRate_CountsOnlyTheLastMinute(t *testing.T) {
	start := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	at := func(seconds float64) time.Time { return start.Add(time.Duration(seconds * float64(time.Second))) }
	type sample struct {
		at         float64
		admissions int64
	}
	cases := []struct {
		name    string
		samples []sample
		now     float64
		want    float64
		known   bool
	}{
		{"nothing observed", nil, 0, 0, false},
		{"one sample is no rate", []sample{{0, 10}}, 0, 0, false},
		{"two samples", []sample{{0, 0}, {2, 10}}, 2, 5, true},
		{"no admissions is a known zero", []sample{{0, 7}, {1, 7}, {2, 7}}, 2, 0, true},
		{"over the whole window", []sample{{0, 0}, {30, 30}, {60, 60}}, 60, 1, true},
		{"an admission leaves the window", []sample{{0, 0}, {1, 5}, {30, 5}, {61, 5}}, 61, 0, true},
		{"the window ends now, not at the last sample", []sample{{0, 0}, {1, 5}}, 61, 0, false},
		{"the newest sample is kept while within the window", []sample{{0, 0}, {1, 5}}, 60, 5, true},
		{"a sample not newer than the last is ignored", []sample{{0, 0}, {2, 4}, {2, 100}, {1, 100}}, 2, 2, true},
		{"a count that falls starts over", []sample{{0, 0}, {1, 50}, {2, 3}}, 2, 0, false},
		{"after starting over", []sample{{0, 0}, {1, 50}, {2, 3}, {4, 7}}, 4, 2, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r waiting.AdmissionRate
			for _, s := range c.samples {
				r.Observe(s.admissions, at(s.at))
			}
			got, known := r.PerSecond(at(c.now))
			if got != c.want || known != c.known {
				t.Fatalf("PerSecond = %g, %v; want %g, %v", got, known, c.want, c.known)
			}
		})
	}
}

// TestAdmissionRate_SoldOutRushEndsUnknownNotNegative is the reported failure: admissions at
// the start, then every slot held. The estimate grows while the admissions age, stays a day at
// most, and once the last admission is a minute old it is unknown, never a negative number.
func TestAdmissionRate_SoldOutRushEndsUnknownNotNegative(t *testing.T) {
	start := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	var r waiting.AdmissionRate
	r.Observe(0, start)
	r.Observe(800, start.Add(time.Second))
	const ahead = 5000
	previous := 0
	for second := 1; second <= 120; second++ {
		now := start.Add(time.Duration(second) * time.Second)
		r.Observe(800, now)
		perSecond, _ := r.PerSecond(now)
		wait, known := waiting.EstimateWait(ahead, perSecond)
		if second <= 60 {
			if !known || wait < previous || wait > int(waiting.MaxEstimatedWait.Seconds()) {
				t.Fatalf("second %d: estimate %d (known %v) after %d", second, wait, known, previous)
			}
			previous = wait
			continue
		}
		if known {
			t.Fatalf("second %d: estimate %d, want unknown a minute after the last admission", second, wait)
		}
	}
}
