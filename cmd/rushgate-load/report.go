package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rushgate/rushgate/adapters/gormdb"
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

// runStats summarises one timed run, of join requests or of ceiling transactions.
type runStats struct {
	total      int
	succeeded  int // 201 joins, or committed transactions
	duration   time.Duration
	latency    latencies
	byStatus   map[int]int // HTTP status → responses; empty for the ceiling
	errors     int         // requests without a response, or failed transactions
	firstError string
	first5xx   string // "status: body" of the first 5xx response
}

// statsOf summarises attempts that took duration of wall time.
func statsOf(attempts []attempt, duration time.Duration) runStats {
	s := runStats{total: len(attempts), duration: duration, byStatus: map[int]int{}}
	samples := make([]time.Duration, len(attempts))
	for i, a := range attempts {
		samples[i] = a.latency
		if a.ok {
			s.succeeded++
		}
		if a.status != 0 {
			s.byStatus[a.status]++
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
	s.latency = summarizeLatencies(samples)
	return s
}

// perSecond is n spread over the run's duration.
func (s runStats) perSecond(n int) float64 {
	if s.duration <= 0 {
		return 0
	}
	return float64(n) / s.duration.Seconds()
}

// count5xx is the number of server-fault responses.
func (s runStats) count5xx() int {
	n := 0
	for status, count := range s.byStatus {
		if status >= http.StatusInternalServerError {
			n += count
		}
	}
	return n
}

// report is everything one run prints.
type report struct {
	scenario    scenario
	dialect     gormdb.Dialect
	concurrency int
	runID       string
	rushgate    runStats
	ceiling     *runStats // nil with --no-ceiling
	invariant   invariantResult
}

// maxListedViolations bounds the invariant problems printed; the count says how many exist.
const maxListedViolations = 10

// failures lists why the run fails; empty means PASS.
func (r report) failures() []string {
	var f []string
	if n := r.rushgate.count5xx(); n > 0 {
		f = append(f, fmt.Sprintf("%d responses were 5xx; first %s", n, r.rushgate.first5xx))
	}
	if r.rushgate.errors > 0 {
		f = append(f, fmt.Sprintf("%d requests got no response; first: %s", r.rushgate.errors, r.rushgate.firstError))
	}
	if r.ceiling != nil && r.ceiling.errors > 0 {
		f = append(f, fmt.Sprintf("%d ceiling transactions failed; first: %s", r.ceiling.errors, r.ceiling.firstError))
	}
	v := r.invariant.violations
	if len(v) > maxListedViolations {
		f = append(f, v[:maxListedViolations]...)
		f = append(f, fmt.Sprintf("… and %d more invariant violations", len(v)-maxListedViolations))
	} else {
		f = append(f, v...)
	}
	return f
}

// write prints the report as one table followed by its notes.
func (r report) write(w io.Writer) error {
	sc := r.scenario
	fmt.Fprintf(w, "rushgate-load %s · %s · %d users → %d crew(s) of capacity %d · concurrency %d · run %s\n\n",
		sc.name, r.dialect, sc.users, sc.crews, sc.capacity, r.concurrency, r.runID)

	columns := 2
	if r.ceiling != nil {
		columns = 3
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// Every row has every column, or tabwriter would align the rows after a short one apart.
	row := func(cells ...string) {
		for len(cells) < columns {
			cells = append(cells, "")
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	both := func(label string, value func(runStats) string) {
		if r.ceiling == nil {
			row(label, value(r.rushgate))
			return
		}
		row(label, value(r.rushgate), value(*r.ceiling))
	}

	if r.ceiling == nil {
		row("", "rushgate (HTTP)")
	} else {
		row("", "rushgate (HTTP)", "ceiling (database/sql)")
	}
	both("requests | transactions", func(s runStats) string { return fmt.Sprint(s.total) })
	both("duration", func(s runStats) string { return s.duration.Round(time.Millisecond).String() })
	both("requests/s | tx/s", func(s runStats) string { return rate(s.perSecond(s.total)) })
	both("goodput: 201s/s | commits/s", func(s runStats) string { return rate(s.perSecond(s.succeeded)) })
	both("latency p50", func(s runStats) string { return millis(s.latency.p50) })
	both("latency p95", func(s runStats) string { return millis(s.latency.p95) })
	both("latency p99", func(s runStats) string { return millis(s.latency.p99) })
	both("latency max", func(s runStats) string { return millis(s.latency.max) })
	for _, status := range slices.Sorted(maps.Keys(r.rushgate.byStatus)) {
		row(fmt.Sprintf("status %d %s", status, http.StatusText(status)), fmt.Sprint(r.rushgate.byStatus[status]))
	}
	both("no response | failed tx", func(s runStats) string { return fmt.Sprint(s.errors) })
	if c := r.ceiling; c != nil {
		row("rushgate requests/s ÷ ceiling tx/s", ratio(r.rushgate.perSecond(r.rushgate.total), c.perSecond(c.succeeded)))
		row("rushgate goodput ÷ ceiling tx/s", ratio(r.rushgate.perSecond(r.rushgate.succeeded), c.perSecond(c.succeeded)))
	}
	inv := r.invariant
	row("db: currentMembers (Σ crews)", fmt.Sprint(inv.currentMembers))
	row("db: count(crew_members)", fmt.Sprint(inv.members))
	row("db: count(distinct user_id)", fmt.Sprint(inv.distinctUsers))
	row("expected: Σ min(users sent, capacity)", fmt.Sprint(inv.expected))
	failures := r.failures()
	if len(failures) == 0 {
		row("result", "PASS")
	} else {
		row("result", "FAIL")
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if sc.name == "crew-herd" && r.ceiling != nil {
		fmt.Fprintf(w, "\nnote: crew-herd admits at most %d joins, so rushgate's goodput is capped by the crew, not by\n"+
			"rushgate; compare requests/s with the ceiling's tx/s (the ceiling's crew is uncapped).\n", sc.capacity)
	}
	for _, f := range failures {
		fmt.Fprintln(w, "FAIL:", f)
	}
	return nil
}

func rate(perSecond float64) string { return fmt.Sprintf("%.1f", perSecond) }

func millis(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f×", a/b)
}
