package main

import (
	"fmt"
	"strconv"
	"time"
)

// A scenario is judged on a few measures, each against a target or reported for information.
// A missed target is reported, never an error: correctness (the invariant, 5xx, transport
// errors) decides the exit status, performance decides PASS/MISS.

// measure is a number read off a run.
type measure int

const (
	// measureGoodputRatio is rushgate's 201s/s ÷ the ceiling's commits/s: what rushgate gets done
	// against what the bare database transaction gets done. 429s and CREW_FULLs do not count.
	measureGoodputRatio measure = iota
	// measureP99 is rushgate's latency p99.
	measureP99
	// measure429 is the number of 429 Too Many Requests answers: load shed, reported as such.
	measure429
	// measureTimeToFill is the time from the start of the run until the last seat was granted:
	// the completion time of the latest 201 (of the latest commit, for the ceiling).
	measureTimeToFill
	// measureFillRatio is rushgate's time to fill ÷ the ceiling's.
	measureFillRatio
	// measureGrantRateRatio is rushgate's grants/s until its last grant ÷ the ceiling's commits/s
	// until its last commit (runStats.grantRate): how fast a limited stock is handed out,
	// unflattered by the cheap refusals after it is gone.
	measureGrantRateRatio
	// measureEarlyRefusals is the number of requests refused with COUPON_ISSUE_FAILED while
	// coupons remained (runStats.earlyRefusals).
	measureEarlyRefusals
)

// label names the measure in the report.
func (m measure) label() string {
	switch m {
	case measureGoodputRatio:
		return "goodput ÷ ceiling (201s/s ÷ commits/s)"
	case measureP99:
		return "latency p99"
	case measure429:
		return "429 too many requests"
	case measureTimeToFill:
		return "time to fill (start → last 201 | commit)"
	case measureFillRatio:
		return "time to fill ÷ ceiling's"
	case measureGrantRateRatio:
		return "grant rate ÷ ceiling (201s ÷ commits per s, until the last)"
	case measureEarlyRefusals:
		return "COUPON_ISSUE_FAILED while coupons remained"
	}
	return fmt.Sprintf("measure %d", int(m))
}

// short names the measure in the summary.
func (m measure) short() string {
	switch m {
	case measureGoodputRatio:
		return "goodput÷ceiling"
	case measureTimeToFill:
		return "time-to-fill"
	case measureFillRatio:
		return "fill÷ceiling"
	case measureGrantRateRatio:
		return "grant-rate÷ceiling"
	case measureEarlyRefusals:
		return "early refusals"
	}
	return m.label()
}

// format writes a value of the measure: ratios as 1.23×, times in ms, counts as integers.
func (m measure) format(x float64) string {
	switch m {
	case measureGoodputRatio, measureFillRatio, measureGrantRateRatio:
		return fmt.Sprintf("%.2f×", x)
	case measureP99, measureTimeToFill:
		return fmt.Sprintf("%.2f ms", x)
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}

// bound is how a target compares.
type bound int

const (
	info    bound = iota // reported, not judged
	atLeast              // value ≥ limit
	atMost               // value ≤ limit
)

// target is one thing a scenario is judged on.
type target struct {
	measure measure
	bound   bound
	limit   float64 // in the measure's unit: × for ratios, ms for times, a count for 429s
	// concurrency, when not 0, is the only concurrency the limit is set for; at any other the
	// target is reported but not judged.
	concurrency int
	// grants is, for the time-to-fill measures, the number of 201s (commits) that fill the run's
	// crews; fewer and there is no time to fill.
	grants int
}

// text is the target as the report prints it, e.g. "≥ 2.00× at c=64"; "" for info.
func (t target) text() string {
	var s string
	switch t.bound {
	case info:
		return ""
	case atLeast:
		s = "≥ " + t.formatLimit()
	case atMost:
		s = "≤ " + t.formatLimit()
		if t.limit == 0 {
			s = "0"
		}
	}
	if t.concurrency != 0 {
		s += fmt.Sprintf(" at c=%d", t.concurrency)
	}
	return s
}

func (t target) formatLimit() string {
	if t.measure == measureP99 || t.measure == measureTimeToFill {
		return strconv.FormatFloat(t.limit, 'f', -1, 64) + " ms"
	}
	return t.measure.format(t.limit)
}

// Verdict states. An info target has none.
const (
	statePass      = "PASS"
	stateMiss      = "MISS"
	stateNotJudged = "n/a"
)

// verdict is a target applied to a run.
type verdict struct {
	target  target
	value   string // rushgate's value, formatted, or why there is none
	ceiling string // the ceiling's value where the measure has one, formatted
	state   string // statePass, stateMiss, stateNotJudged, or "" for info
	note    string // why the target was not judged
}

// measurement is what a run measured, as the judge reads it.
type measurement struct {
	rushgate    runStats
	ceiling     *runStats // nil with --no-ceiling
	concurrency int
}

// judge applies t to m.
func judge(t target, m measurement) verdict {
	v := verdict{target: t}
	x, missing := read(t, m)
	if missing != "" {
		v.value = missing
	} else {
		v.value = t.measure.format(x)
	}
	if t.measure == measureTimeToFill && m.ceiling != nil {
		if ttf, why := timeToFill(*m.ceiling, t.grants); why == "" {
			v.ceiling = t.measure.format(inMillis(ttf))
		} else {
			v.ceiling = why
		}
	}
	if t.measure == measureEarlyRefusals && m.ceiling != nil {
		v.ceiling = t.measure.format(float64(m.ceiling.earlyRefusals))
	}
	switch {
	case t.bound == info:
	case missing != "":
		v.state, v.note = stateNotJudged, missing
	case t.concurrency != 0 && m.concurrency != t.concurrency:
		v.state = stateNotJudged
		v.note = fmt.Sprintf("the target is set for concurrency %d, this run used %d", t.concurrency, m.concurrency)
	case t.bound == atLeast && x >= t.limit, t.bound == atMost && x <= t.limit:
		v.state = statePass
	default:
		v.state = stateMiss
	}
	return v
}

// read is the value of t's measure in m, or why it has none.
func read(t target, m measurement) (float64, string) {
	switch t.measure {
	case measureGoodputRatio:
		if m.ceiling == nil {
			return 0, "no ceiling run"
		}
		c := m.ceiling.perSecond(m.ceiling.succeeded)
		if c == 0 {
			return 0, "the ceiling committed nothing"
		}
		return m.rushgate.perSecond(m.rushgate.succeeded) / c, ""
	case measureP99:
		return inMillis(m.rushgate.latency.p99), ""
	case measure429:
		return float64(m.rushgate.count429()), ""
	case measureTimeToFill:
		ttf, why := timeToFill(m.rushgate, t.grants)
		return inMillis(ttf), why
	case measureFillRatio:
		if m.ceiling == nil {
			return 0, "no ceiling run"
		}
		ttf, why := timeToFill(m.rushgate, t.grants)
		if why != "" {
			return 0, why
		}
		cttf, why := timeToFill(*m.ceiling, t.grants)
		if why != "" {
			return 0, "ceiling " + why
		}
		if cttf <= 0 {
			return 0, "the ceiling took no time"
		}
		return float64(ttf) / float64(cttf), ""
	case measureGrantRateRatio:
		if m.ceiling == nil {
			return 0, "no ceiling run"
		}
		c := m.ceiling.grantRate()
		if c == 0 {
			return 0, "the ceiling committed nothing"
		}
		return m.rushgate.grantRate() / c, ""
	case measureEarlyRefusals:
		return float64(m.rushgate.earlyRefusals), ""
	}
	return 0, "unknown measure"
}

// timeToFill is when s granted its last seat, or why it never filled the grants seats.
func timeToFill(s runStats, grants int) (time.Duration, string) {
	if s.succeeded < grants {
		return 0, fmt.Sprintf("not filled: %d of %d seats", s.succeeded, grants)
	}
	return s.lastSuccess, ""
}

// inMillis is d in (fractional) milliseconds.
func inMillis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
