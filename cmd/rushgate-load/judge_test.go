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
	hundredPerSecond := runOf(100, time.Second, make([]time.Duration, 100)...)
	ceiling := runOf(50, time.Second, make([]time.Duration, 50)...) // 50 commits/s
	slow := statsOf([]attempt{{latency: ms(200)}, {latency: ms(301)}}, time.Second)
	shed := statsOf([]attempt{{status: 201, ok: true}, {status: 429}, {status: 429}}, time.Second)

	cases := []struct {
		name      string
		target    target
		m         measurement
		wantValue string
		wantState string
	}{
		{"goodput twice the ceiling meets ≥ 2×",
			target{measure: measureGoodputRatio, bound: atLeast, limit: 2},
			measurement{rushgate: hundredPerSecond, ceiling: &ceiling}, "2.00×", statePass},
		{"goodput twice the ceiling misses ≥ 2.5×",
			target{measure: measureGoodputRatio, bound: atLeast, limit: 2.5},
			measurement{rushgate: hundredPerSecond, ceiling: &ceiling}, "2.00×", stateMiss},
		{"p99 over 300 ms misses",
			target{measure: measureP99, bound: atMost, limit: 300},
			measurement{rushgate: slow}, "301.00 ms", stateMiss},
		{"p99 at 300 ms passes",
			target{measure: measureP99, bound: atMost, limit: 301},
			measurement{rushgate: slow}, "301.00 ms", statePass},
		{"two 429s miss zero",
			target{measure: measure429, bound: atMost, limit: 0},
			measurement{rushgate: shed}, "2", stateMiss},
		{"no 429 meets zero",
			target{measure: measure429, bound: atMost, limit: 0},
			measurement{rushgate: hundredPerSecond}, "0", statePass},
		{"a ratio without a ceiling is not judged",
			target{measure: measureGoodputRatio, bound: atLeast, limit: 2},
			measurement{rushgate: hundredPerSecond}, "no ceiling run", stateNotJudged},
		{"a target set at concurrency 64 is not judged at 32",
			target{measure: measureGoodputRatio, bound: atLeast, limit: 1, concurrency: 64},
			measurement{rushgate: hundredPerSecond, ceiling: &ceiling, concurrency: 32}, "2.00×", stateNotJudged},
		{"a target set at concurrency 64 is judged at 64",
			target{measure: measureGoodputRatio, bound: atLeast, limit: 1, concurrency: 64},
			measurement{rushgate: hundredPerSecond, ceiling: &ceiling, concurrency: 64}, "2.00×", statePass},
		{"an info target has no state",
			target{measure: measureP99},
			measurement{rushgate: slow}, "301.00 ms", ""},
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

func TestJudge_GoodputRatioCountsOnly201sNotCheapRefusals(t *testing.T) {
	t.Parallel()
	// 1000 answers in a second, of which 100 are 201s: 100/s against a ceiling of 50 commits/s.
	herd := runOf(1000, time.Second, make([]time.Duration, 100)...)
	ceiling := runOf(50, time.Second, make([]time.Duration, 50)...)

	v := judge(target{measure: measureGoodputRatio, bound: atLeast, limit: 2}, measurement{rushgate: herd, ceiling: &ceiling})

	assert.Equal(t, "2.00×", v.value, "not 20× from requests/s")
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

func TestTimeToFill_OfACrewThatNeverFilledIsNotATime(t *testing.T) {
	t.Parallel()
	rushgate := runOf(10, time.Second, ms(30), ms(70))
	m := measurement{rushgate: rushgate}

	fill := judge(target{measure: measureTimeToFill, grants: 3}, m)

	assert.Equal(t, "not filled: 2 of 3 seats", fill.value)
}

func TestRunConcurrently_StampsEachAttemptWithItsCompletionTime(t *testing.T) {
	t.Parallel()
	attempts, elapsed := runConcurrently(t.Context(), work{n: 3, do: func(_ context.Context, i int) attempt {
		time.Sleep(time.Duration(3-i) * 10 * time.Millisecond)
		return attempt{ok: true, status: 201 + i}
	}}, 3)

	for i, a := range attempts {
		assert.Equal(t, 201+i, a.status, "attempt %d is in call order", i)
		assert.GreaterOrEqual(t, a.end, time.Duration(3-i)*10*time.Millisecond)
		assert.LessOrEqual(t, a.end, elapsed)
	}
	assert.Greater(t, attempts[0].end, attempts[2].end, "the slowest call completed last")
	assert.Equal(t, attempts[0].end, statsOf(attempts, elapsed).lastSuccess)
}
