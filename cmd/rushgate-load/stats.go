package main

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"
)

// latencies are exact percentiles over every sample of a run.
type latencies struct {
	p50, p95, p99, max time.Duration
}

// summarizeLatencies sorts a copy of samples and reads the percentiles off it.
func summarizeLatencies(samples []time.Duration) latencies {
	if len(samples) == 0 {
		return latencies{}
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	return latencies{
		p50: percentile(sorted, 50),
		p95: percentile(sorted, 95),
		p99: percentile(sorted, 99),
		max: sorted[len(sorted)-1],
	}
}

// percentile is the nearest-rank p-th percentile of sorted (non-empty, ascending): the smallest
// sample that at least p% of the samples do not exceed.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

// answer is one kind of HTTP response: its status and, for an error, its code.
type answer struct {
	status int
	code   string
}

// runStats summarises one timed run, of requests or of ceiling transactions.
type runStats struct {
	total       int
	succeeded   int // 201s, or committed transactions
	duration    time.Duration
	lastSuccess time.Duration // completion time of the latest success, from the start of the run
	latency     latencies
	answers     map[answer]int // HTTP answers; empty for the ceiling
	perInstance map[int]int    // requests sent to each instance
	// earlyRefusals are requests refused with a "retry" code (COUPON_ISSUE_FAILED) before the
	// run's last success: turned away while what they asked for remained.
	earlyRefusals int
	errors        int // requests without a response, or failed transactions
	firstError    string
	first5xx      string // "status: body" of the first 5xx response
	// cpuPerRequest is the CPU each role's processes spent per request, in µs (see cpu.go); nil
	// where it could not be read.
	cpuPerRequest map[cpuRole]float64
}

// statsOf summarises attempts that took duration of wall time.
func statsOf(attempts []attempt, duration time.Duration) runStats {
	s := runStats{total: len(attempts), duration: duration, answers: map[answer]int{}, perInstance: map[int]int{}}
	samples := make([]time.Duration, len(attempts))
	for i, a := range attempts {
		samples[i] = a.latency
		s.perInstance[a.instance]++
		if a.ok {
			s.succeeded++
			s.lastSuccess = max(s.lastSuccess, a.end)
		}
		if a.status != 0 {
			s.answers[answer{a.status, a.code}]++
		}
		if a.err != nil {
			s.errors++
			if s.firstError == "" {
				s.firstError = a.err.Error()
			}
		}
		if a.status >= http.StatusInternalServerError && s.first5xx == "" {
			s.first5xx = fmt.Sprintf("%d: %s", a.status, a.detail)
		}
	}
	for _, a := range attempts {
		if !a.ok && a.code == codeIssueFailed && a.end < s.lastSuccess {
			s.earlyRefusals++
		}
	}
	s.latency = summarizeLatencies(samples)
	return s
}

// grantRate is successes per second until the last success: how fast what was there to take was
// taken. Answers after it (a sold-out herd's cheap refusals) do not dilute or inflate it.
func (s runStats) grantRate() float64 {
	if s.lastSuccess <= 0 {
		return 0
	}
	return float64(s.succeeded) / s.lastSuccess.Seconds()
}

// perSecond is n spread over the run's duration.
func (s runStats) perSecond(n int) float64 {
	if s.duration <= 0 {
		return 0
	}
	return float64(n) / s.duration.Seconds()
}

// withStatus is the number of responses whose status satisfies match.
func (s runStats) withStatus(match func(status int) bool) int {
	n := 0
	for a, count := range s.answers {
		if match(a.status) {
			n += count
		}
	}
	return n
}

// count5xx is the number of server-fault responses.
func (s runStats) count5xx() int {
	return s.withStatus(func(status int) bool { return status >= http.StatusInternalServerError })
}

// count429 is the number of 429 Too Many Requests responses: load the server shed, not joins
// that failed.
func (s runStats) count429() int {
	return s.withStatus(func(status int) bool { return status == http.StatusTooManyRequests })
}
