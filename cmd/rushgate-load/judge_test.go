package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// runOf is a run of total requests over duration where the successes completed at ends.
func runOf(total int, duration time.Duration, ends ...time.Duration) runStats {
	attempts := make([]attempt, total)
	for i := range attempts {
		attempts[i] = attempt{latency: ms(1), status: 400, code: "CREW_FULL", end: duration}
	}
	for i, end := range ends {
		attempts[i] = attempt{latency: ms(1), status: 201, ok: true, end: end}
	}
	return statsOf(attempts, duration)
}

func TestJudge_PassesAndMissesAgainstTheTarget(t *testing.T) {
	t.Parallel()
	ceiling := runOf(50, time.Second, make([]time.Duration, 50)...) // 50 commits/s
	// 100 201s in a second, against the ceiling's 50 commits/s.
	twiceTheCeiling := measurement{rushgate: runOf(100, time.Second, make([]time.Duration, 100)...), ceiling: &ceiling}
	// 1000 answers in a second, of which 100 are 201s: 2×, not 20× from requests/s.
	herd := measurement{rushgate: runOf(1000, time.Second, make([]time.Duration, 100)...), ceiling: &ceiling}
	noCeiling := measurement{rushgate: twiceTheCeiling.rushgate}
	at := func(m measurement, concurrency int) measurement { m.concurrency = concurrency; return m }
	slow := measurement{rushgate: statsOf([]attempt{{latency: ms(200)}, {latency: ms(301)}}, time.Second)}
	shed := measurement{rushgate: statsOf([]attempt{{status: 201, ok: true}, {status: 429}, {status: 429}}, time.Second)}
	unfilled := measurement{rushgate: runOf(10, time.Second, ms(30), ms(70))}

	goodput := func(limit float64, concurrency int) target {
		return target{measure: measureGoodputRatio, bound: atLeast, limit: limit, concurrency: concurrency}
	}
	p99 := target{measure: measureP99, bound: atMost, limit: 300}
	no429 := target{measure: measure429, bound: atMost, limit: 0}

	cases := []struct {
		name      string
		target    target
		m         measurement
		wantValue string
		wantState string
	}{
		{"goodput twice the ceiling meets ≥ 2×", goodput(2, 0), twiceTheCeiling, "2.00×", statePass},
		{"goodput twice the ceiling misses ≥ 2.5×", goodput(2.5, 0), twiceTheCeiling, "2.00×", stateMiss},
		{"goodput counts only 201s, not cheap refusals", goodput(2, 0), herd, "2.00×", statePass},
		{"a ratio without a ceiling is not judged", goodput(2, 0), noCeiling, "no ceiling run", stateNotJudged},
		{"a target set at concurrency 64 is not judged at 32", goodput(1, 64), at(twiceTheCeiling, 32), "2.00×", stateNotJudged},
		{"a target set at concurrency 64 is judged at 64", goodput(1, 64), at(twiceTheCeiling, 64), "2.00×", statePass},
		{"p99 over its limit misses", p99, slow, "301.00 ms", stateMiss},
		{"p99 at its limit passes", target{measure: measureP99, bound: atMost, limit: 301}, slow, "301.00 ms", statePass},
		{"an info target has no state", target{measure: measureP99}, slow, "301.00 ms", ""},
		{"two 429s miss zero", no429, shed, "2", stateMiss},
		{"no 429 meets zero", no429, twiceTheCeiling, "0", statePass},
		{"a crew that never filled has no time to fill", target{measure: measureTimeToFill, grants: 3}, unfilled, "not filled: 2 of 3 seats", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			v := judge(c.target, c.m)
			assert.Equal(t, c.wantValue, v.value)
			assert.Equal(t, c.wantState, v.state)
		})
	}
}

func TestTimeToFill_IsTheCompletionOfTheLatestSuccessNotTheRunsEnd(t *testing.T) {
	t.Parallel()
	// Three seats granted at 30, 70 and 50 ms; the refusals go on until 900 ms.
	rushgate := runOf(10, 900*time.Millisecond, ms(30), ms(70), ms(50))
	ceiling := runOf(10, 100*time.Millisecond, ms(5), ms(20), ms(10))
	m := measurement{rushgate: rushgate, ceiling: &ceiling}

	fill := judge(target{measure: measureTimeToFill, grants: 3}, m)
	ratio := judge(target{measure: measureFillRatio, grants: 3}, m)

	assert.Equal(t, ms(70), rushgate.lastSuccess)
	assert.Equal(t, "70.00 ms", fill.value)
	assert.Equal(t, "20.00 ms", fill.ceiling)
	assert.Empty(t, fill.state, "time-to-fill has no target: it is reported")
	assert.Equal(t, "3.50×", ratio.value)
}

func TestRunConcurrently_StampsEachAttemptWithItsCompletionTimeNotItsIndex(t *testing.T) {
	t.Parallel()
	// Two workers: call 0 is held until call 3 has waited 1 ms, so the other worker carries out
	// 1, 2 and 3 one after another, and call 2 is stamped before call 3 starts.
	released := make(chan struct{})
	attempts, elapsed := runConcurrently(t.Context(), work{n: 4, do: func(_ context.Context, i int) attempt {
		switch i {
		case 0:
			<-released
		case 3:
			time.Sleep(time.Millisecond) // a lower bound, not a hope
			close(released)
		}
		return attempt{ok: true, status: 201 + i}
	}}, 2)

	for i, a := range attempts {
		assert.Equal(t, 201+i, a.status, "attempt %d is in call order", i)
		assert.LessOrEqual(t, a.end, elapsed)
	}
	assert.LessOrEqual(t, attempts[1].end, attempts[2].end)
	assert.GreaterOrEqual(t, attempts[0].end-attempts[2].end, time.Millisecond, "the held call completed after 1 and 2")
	assert.Equal(t, max(attempts[0].end, attempts[3].end), statsOf(attempts, elapsed).lastSuccess)
}
