package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rushgate/rushgate/adapters/gormdb"
)

// report is everything one run of one scenario prints.
type report struct {
	scenario    string
	shape       string
	dialect     gormdb.Dialect
	instances   int
	concurrency int
	runID       string
	rushgate    runStats
	ceiling     *runStats // nil with --no-ceiling
	ceilingName string    // what the ceiling runs, e.g. database/sql
	invariant   invariantResult
	verdicts    []verdict // in the scenario's order: the first is the headline
}

// judgeAll applies every target to m.
func judgeAll(targets []target, m measurement) []verdict {
	verdicts := make([]verdict, len(targets))
	for i, t := range targets {
		verdicts[i] = judge(t, m)
	}
	return verdicts
}

// maxListedViolations bounds the invariant problems printed; the count says how many exist.
const maxListedViolations = 10

// failures lists why the run fails: correctness, never performance. Empty means PASS. 429s are
// load shed, counted and judged as a target where the scenario has one, never a failure here.
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

// withState lists the verdicts in state.
func (r report) withState(state string) []verdict {
	var out []verdict
	for _, v := range r.verdicts {
		if v.state == state {
			out = append(out, v)
		}
	}
	return out
}

// verdictOn is the verdict on measure m, if the scenario is judged on it.
func (r report) verdictOn(m measure) (verdict, bool) {
	i := slices.IndexFunc(r.verdicts, func(v verdict) bool { return v.target.measure == m })
	if i < 0 {
		return verdict{}, false
	}
	return r.verdicts[i], true
}

// result is the run's one-word correctness result.
func (r report) result() string {
	if len(r.failures()) == 0 {
		return "PASS"
	}
	return "FAIL"
}

// targetsLine counts the verdicts, e.g. "2 PASS, 1 MISS".
func (r report) targetsLine() string {
	var parts []string
	for _, state := range []string{statePass, stateMiss, stateNotJudged} {
		if n := len(r.withState(state)); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, state))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// write prints the report as one table, targets next to the values they judge, then its notes.
func (r report) write(w io.Writer) error {
	p := &printer{w: w}
	p.printf("rushgate-load %s · %s · %s · %s · concurrency %d · run %s\n\n",
		r.scenario, r.dialect, plural(r.instances, "instance", "instances"), r.shape, r.concurrency, r.runID)

	var table strings.Builder // tabwriter pads empty trailing cells; trimmed before printing
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	tp := &printer{w: tw}
	// Every row has every column, or tabwriter would align the rows after a short one apart.
	row := func(label, rushgate, ceiling string, v *verdict) {
		cells := []string{label, rushgate}
		if r.ceiling != nil {
			cells = append(cells, ceiling)
		}
		if v != nil {
			cells = append(cells, v.target.text(), v.state)
		} else {
			cells = append(cells, "", "")
		}
		tp.printf("%s\n", strings.Join(cells, "\t"))
	}
	both := func(label string, value func(runStats) string) {
		c := ""
		if r.ceiling != nil {
			c = value(*r.ceiling)
		}
		row(label, value(r.rushgate), c, nil)
	}
	judged := func(m measure) *verdict {
		if v, ok := r.verdictOn(m); ok {
			return &v
		}
		return nil
	}

	header := []string{"", "rushgate (HTTP)"}
	if r.ceiling != nil {
		header = append(header, "ceiling ("+r.ceilingName+")")
	}
	tp.printf("%s\n", strings.Join(append(header, "target", ""), "\t"))
	row("requests per instance", r.perInstance(), "", nil)
	both("requests | transactions", func(s runStats) string { return fmt.Sprint(s.total) })
	both("duration", func(s runStats) string { return s.duration.Round(time.Millisecond).String() })
	both("requests/s | tx/s", func(s runStats) string { return rate(s.perSecond(s.total)) })
	both("201s | commits", func(s runStats) string { return fmt.Sprint(s.succeeded) })
	both("goodput: 201s/s | commits/s", func(s runStats) string { return rate(s.perSecond(s.succeeded)) })
	both("latency p50", func(s runStats) string { return millis(s.latency.p50) })
	both("latency p95", func(s runStats) string { return millis(s.latency.p95) })
	c99 := ""
	if r.ceiling != nil {
		c99 = millis(r.ceiling.latency.p99)
	}
	row("latency p99", millis(r.rushgate.latency.p99), c99, judged(measureP99))
	both("latency max", func(s runStats) string { return millis(s.latency.max) })
	for _, a := range slices.SortedFunc(maps.Keys(r.rushgate.answers), func(a, b answer) int {
		return cmp.Or(cmp.Compare(a.status, b.status), cmp.Compare(a.code, b.code))
	}) {
		if a.status == http.StatusTooManyRequests {
			continue
		}
		row(strings.TrimSpace(fmt.Sprintf("status %d %s %s", a.status, http.StatusText(a.status), a.code)),
			fmt.Sprint(r.rushgate.answers[a]), "", nil)
	}
	row(measure429.label(), fmt.Sprint(r.rushgate.count429()), "", judged(measure429))
	both("no response | failed tx", func(s runStats) string { return fmt.Sprint(s.errors) })
	if r.rushgate.cpuPerRequest != nil {
		for _, role := range cpuRoles {
			both("CPU µs per request | tx: "+string(role), func(s runStats) string {
				return fmt.Sprintf("%.1f", s.cpuPerRequest[role])
			})
		}
		both("CPU µs per request | tx: all", func(s runStats) string {
			total := 0.0
			for _, us := range s.cpuPerRequest {
				total += us
			}
			return fmt.Sprintf("%.1f", total)
		})
	}
	for _, v := range r.verdicts {
		if v.target.measure == measureP99 || v.target.measure == measure429 {
			continue
		}
		row(v.target.measure.label(), v.value, v.ceiling, &v)
	}
	for _, ir := range r.invariant.rows {
		value := ir.text
		if value == "" {
			value = fmt.Sprint(ir.value)
		}
		row(ir.label, value, "", nil)
	}
	invariant := "PASS"
	if !r.invariant.holds() {
		invariant = "FAIL"
	}
	row("invariant", invariant, "", nil)
	if tp.err == nil {
		tp.err = tw.Flush()
	}
	if tp.err != nil {
		return tp.err
	}
	for line := range strings.Lines(table.String()) {
		p.printf("%s\n", strings.TrimRight(line, " \n"))
	}
	p.printf("\nresult: %s · targets: %s\n", r.result(), r.targetsLine())

	if r.instances > 1 && r.ceiling != nil {
		p.printf("note: each of the %d instances has its own database pool; the ceiling has one.\n", r.instances)
	}
	for _, v := range r.withState(stateMiss) {
		p.printf("MISS: %s %s, target %s\n", v.target.measure.label(), v.value, v.target.text())
	}
	for _, v := range r.withState(stateNotJudged) {
		p.printf("not judged: %s: %s\n", v.target.measure.label(), v.note)
	}
	for _, f := range r.failures() {
		p.printf("FAIL: %s\n", f)
	}
	return p.err
}

// printer writes and keeps the first error, so a report is checked once, at its end.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// perInstance is how many requests each instance got, "1000 / 1000".
func (r report) perInstance() string {
	counts := make([]string, r.instances)
	for k := range counts {
		counts[k] = fmt.Sprint(r.rushgate.perInstance[k])
	}
	return strings.Join(counts, " / ")
}

// summaryHeader names the columns of summaryRow.
var summaryHeader = []string{"scenario", "db", "instances", "judged on", "value", "target", "p99", "429s", "invariant", "result"}

// summaryRow is the run in one line of the summary of many runs.
func (r report) summaryRow() []string {
	judgedOn, value, target := "-", "-", "-"
	if len(r.verdicts) > 0 {
		h := r.verdicts[0]
		judgedOn, value = h.target.measure.short(), h.value
		if h.ceiling != "" {
			value += " (ceiling " + h.ceiling + ")"
		}
		if h.state != "" {
			target = strings.TrimSpace(h.target.text() + " " + h.state)
		}
	}
	p99 := millis(r.rushgate.latency.p99)
	if v, ok := r.verdictOn(measureP99); ok && v.state != "" {
		p99 += " " + v.state
	}
	invariant := "PASS"
	if !r.invariant.holds() {
		invariant = "FAIL"
	}
	return []string{
		r.scenario, string(r.dialect), fmt.Sprint(r.instances), judgedOn, value, target, p99,
		fmt.Sprint(r.rushgate.count429()), invariant, r.result(),
	}
}

func rate(perSecond float64) string { return fmt.Sprintf("%.1f", perSecond) }

func millis(d time.Duration) string { return fmt.Sprintf("%.2f ms", inMillis(d)) }
