package main

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// oneToHundred is 1ms..100ms shuffled, so percentile p is exactly p ms.
func oneToHundred() []time.Duration {
	samples := make([]time.Duration, 100)
	for i := range samples {
		samples[(i*37)%100] = ms(i + 1) // 37 is coprime with 100: a permutation
	}
	return samples
}

func TestPercentile_IsNearestRank(t *testing.T) {
	t.Parallel()
	sorted := []time.Duration{ms(10), ms(20), ms(30), ms(40)}
	cases := []struct {
		p    float64
		want time.Duration
	}{
		{0, ms(10)},
		{25, ms(10)},
		{26, ms(20)},
		{50, ms(20)},
		{75, ms(30)},
		{99, ms(40)},
		{100, ms(40)},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, percentile(sorted, c.p), "p%v", c.p)
	}
}

func TestSummarizeLatencies_ReadsExactPercentilesWithoutReorderingTheInput(t *testing.T) {
	t.Parallel()
	samples := oneToHundred()
	before := slices.Clone(samples)

	got := summarizeLatencies(samples)

	assert.Equal(t, latencies{p50: ms(50), p95: ms(95), p99: ms(99), max: ms(100)}, got)
	assert.Equal(t, before, samples)
}

func TestSummarizeLatencies_OfOneSampleIsThatSample(t *testing.T) {
	t.Parallel()
	got := summarizeLatencies([]time.Duration{ms(7)})
	assert.Equal(t, latencies{p50: ms(7), p95: ms(7), p99: ms(7), max: ms(7)}, got)
	assert.Equal(t, latencies{}, summarizeLatencies(nil))
}

func TestStatsOf_CountsStatusesSuccessesErrorsAndFirst5xx(t *testing.T) {
	t.Parallel()
	attempts := []attempt{
		{latency: ms(1), status: 201, ok: true},
		{latency: ms(2), status: 400},
		{latency: ms(3), status: 400},
		{latency: ms(4), status: 503, detail: `{"error":"UNAVAILABLE"}`},
		{latency: ms(5), status: 500, detail: `{"error":"INTERNAL"}`},
		{latency: ms(6), err: errors.New("connection refused")},
	}

	s := statsOf(attempts, 2*time.Second)

	assert.Equal(t, 6, s.total)
	assert.Equal(t, 1, s.succeeded)
	assert.Equal(t, map[int]int{201: 1, 400: 2, 503: 1, 500: 1}, s.byStatus)
	assert.Equal(t, 2, s.count5xx())
	assert.Equal(t, 1, s.errors)
	assert.Equal(t, "connection refused", s.firstError)
	assert.Equal(t, `503: {"error":"UNAVAILABLE"}`, s.first5xx)
	assert.Equal(t, ms(6), s.latency.max)
	assert.InDelta(t, 3.0, s.perSecond(s.total), 1e-9)
	assert.InDelta(t, 0.5, s.perSecond(s.succeeded), 1e-9)
}

func TestScenario_SpreadsUsersRoundRobinAndCapsEachCrew(t *testing.T) {
	t.Parallel()
	herd, err := newScenario(config{scenario: "crew-herd", users: 2000, capacity: 100, crews: 200})
	require.NoError(t, err)
	assert.Equal(t, 1, herd.crews)
	assert.Equal(t, 100, herd.expectedMembers(0))

	spread, err := newScenario(config{scenario: "crew-spread", users: 2001, capacity: 100, crews: 200})
	require.NoError(t, err)
	assert.Equal(t, 11, spread.capacity, "each crew holds every user it is sent")
	assert.Equal(t, 11, spread.assigned(0))
	assert.Equal(t, 10, spread.assigned(1))
	total := 0
	for c := range spread.crews {
		total += spread.expectedMembers(c)
	}
	assert.Equal(t, 2001, total)

	_, err = newScenario(config{scenario: "crew-stampede", users: 1, capacity: 1, crews: 1})
	assert.ErrorContains(t, err, "unknown scenario")
	_, err = newScenario(config{scenario: "crew-herd", users: maxCapacity + 1, capacity: 100})
	assert.ErrorContains(t, err, "at most")
}

func TestSummarizeCrews_NamesEveryBrokenCrew(t *testing.T) {
	t.Parallel()
	states := []crewState{
		{id: "ok", currentMembers: 10, maxMembers: 10, members: 10, distinctUsers: 10, expected: 10},
		{id: "drifted", currentMembers: 9, maxMembers: 10, members: 10, distinctUsers: 10, expected: 10},
		{id: "over", currentMembers: 11, maxMembers: 10, members: 11, distinctUsers: 10, expected: 10},
	}

	r := summarizeCrews(states)

	assert.False(t, r.holds())
	assert.Equal(t, 30, r.currentMembers)
	assert.Equal(t, 31, r.members)
	assert.Equal(t, 30, r.expected)
	assert.Equal(t, []string{
		"crew drifted: currentMembers 9 != count(crew_members) 10",
		"crew over: count(crew_members) 11 > maxMembers 10",
		"crew over: 1 duplicate member rows",
		"crew over: count(crew_members) 11, want 10",
	}, r.violations)
	assert.True(t, summarizeCrews(states[:1]).holds())
}

func TestRebind_NumbersPlaceholdersForPostgresOnly(t *testing.T) {
	t.Parallel()
	q := "INSERT INTO t (a, b) VALUES (?, ?)"
	assert.Equal(t, "INSERT INTO t (a, b) VALUES ($1, $2)", rebind(gormdb.Postgres, q))
	assert.Equal(t, q, rebind(gormdb.MySQL, q))
}

func herdReport() report {
	return report{
		scenario:    scenario{name: "crew-herd", users: 4, crews: 1, capacity: 1},
		dialect:     gormdb.Postgres,
		concurrency: 2,
		runID:       "abcd1234",
		rushgate: statsOf([]attempt{
			{latency: ms(10), status: 201, ok: true},
			{latency: ms(20), status: 400},
			{latency: ms(30), status: 400},
			{latency: ms(40), status: 400},
		}, time.Second),
		ceiling: new(statsOf([]attempt{
			{latency: ms(1), ok: true}, {latency: ms(2), ok: true},
			{latency: ms(3), ok: true}, {latency: ms(4), ok: true},
		}, 500*time.Millisecond)),
		invariant: summarizeCrews([]crewState{{id: "c1", currentMembers: 1, maxMembers: 1, members: 1, distinctUsers: 1, expected: 1}}),
	}
}

func TestReport_PrintsOneTableWithRatiosAndPass(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	require.NoError(t, herdReport().write(&out))
	text := out.String()

	for _, want := range []string{
		"rushgate-load crew-herd · postgres · 4 users → 1 crew(s) of capacity 1 · concurrency 2 · run abcd1234",
		"rushgate (HTTP)",
		"ceiling (database/sql)",
		"requests/s | tx/s",
		"latency p95",
		"status 201 Created",
		"status 400 Bad Request",
		"rushgate requests/s ÷ ceiling tx/s",
		"0.500×", // 4 req/s against 8 tx/s
		"0.125×", // 1 join/s against 8 tx/s
		"note: crew-herd admits at most 1 joins",
	} {
		assert.Contains(t, text, want)
	}
	assert.Regexp(t, `result\s+PASS`, text)
	assert.NotContains(t, text, "FAIL")
}

func TestReport_FailsOn5xxTransportErrorsAndInvariantViolations(t *testing.T) {
	t.Parallel()
	r := herdReport()
	r.rushgate = statsOf([]attempt{
		{latency: ms(1), status: 503, detail: `{"error":"UNAVAILABLE"}`},
		{latency: ms(2), err: errors.New("timeout")},
	}, time.Second)
	r.ceiling = nil
	r.invariant = summarizeCrews([]crewState{{id: "c1", currentMembers: 2, maxMembers: 1, members: 2, distinctUsers: 2, expected: 1}})

	var out strings.Builder
	require.NoError(t, r.write(&out))
	text := out.String()

	assert.Regexp(t, `result\s+FAIL`, text)
	assert.Contains(t, text, `FAIL: 1 responses were 5xx; first 503: {"error":"UNAVAILABLE"}`)
	assert.Contains(t, text, "FAIL: 1 requests got no response; first: timeout")
	assert.Contains(t, text, "FAIL: crew c1: count(crew_members) 2 > maxMembers 1")
	assert.NotContains(t, text, "ceiling", "--no-ceiling leaves the ceiling out")
}
