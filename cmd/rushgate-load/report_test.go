package main

import (
	"errors"
	"os"
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

func TestStatsOf_CountsAnswersSuccessesErrorsInstancesAndFirst5xx(t *testing.T) {
	t.Parallel()
	attempts := []attempt{
		{latency: ms(1), status: 201, ok: true, instance: 0},
		{latency: ms(2), status: 400, code: "CREW_FULL", instance: 1},
		{latency: ms(3), status: 400, code: "CREW_FULL", instance: 0},
		{latency: ms(4), status: 429, code: "TOO_MANY_REQUESTS", instance: 1},
		{latency: ms(5), status: 503, detail: `{"error":"UNAVAILABLE"}`, instance: 0},
		{latency: ms(6), status: 500, detail: `{"error":"INTERNAL"}`, instance: 1},
		{latency: ms(7), err: errors.New("connection refused"), instance: 0},
	}

	s := statsOf(attempts, 2*time.Second)

	assert.Equal(t, 7, s.total)
	assert.Equal(t, 1, s.succeeded)
	assert.Equal(t, map[answer]int{
		{201, ""}: 1, {400, "CREW_FULL"}: 2, {429, "TOO_MANY_REQUESTS"}: 1, {503, ""}: 1, {500, ""}: 1,
	}, s.answers)
	assert.Equal(t, map[int]int{0: 4, 1: 3}, s.perInstance)
	assert.Equal(t, 2, s.count5xx())
	assert.Equal(t, 1, s.count429())
	assert.Equal(t, 1, s.errors)
	assert.Equal(t, "connection refused", s.firstError)
	assert.Equal(t, `503: {"error":"UNAVAILABLE"}`, s.first5xx)
	assert.Equal(t, ms(7), s.latency.max)
	assert.InDelta(t, 3.5, s.perSecond(s.total), 1e-9)
	assert.InDelta(t, 0.5, s.perSecond(s.succeeded), 1e-9)
}

// hotReport is a crew-hot run of 4 users over 2 instances: 3 joined, 1 was shed with a 429, at
// a quarter of the ceiling's rate; the database holds exactly the 3.
func hotReport(t *testing.T) report {
	t.Helper()
	sc, err := newCrewHot(config{users: 4})
	require.NoError(t, err)
	rushgate := statsOf([]attempt{
		{latency: ms(10), end: ms(10), status: 201, ok: true, instance: 0},
		{latency: ms(20), end: ms(20), status: 201, ok: true, instance: 1},
		{latency: ms(30), end: ms(30), status: 429, code: "TOO_MANY_REQUESTS", instance: 0},
		{latency: ms(40), end: ms(40), status: 201, ok: true, instance: 1},
	}, time.Second)
	ceiling := statsOf([]attempt{
		{latency: ms(1), ok: true}, {latency: ms(2), ok: true},
		{latency: ms(3), ok: true}, {latency: ms(4), ok: true},
	}, 250*time.Millisecond)
	sent := map[string]attempt{"u0": {status: 201}, "u1": {status: 201}, "u2": {status: 429}, "u3": {status: 201}}
	r := report{
		scenario:    "crew-hot",
		shape:       sc.shape(),
		dialect:     gormdb.Postgres,
		instances:   2,
		concurrency: 64,
		runID:       "abcd1234",
		rushgate:    rushgate,
		ceiling:     &ceiling,
		ceilingName: ceilingName(sc),
		invariant: summarizeCrews([]crewState{{
			id: "c1", currentMembers: 3, maxMembers: 4, memberIDs: []string{"u0", "u1", "u3"}, sent: sent,
		}}),
	}
	r.verdicts = judgeAll(sc.targets(gormdb.Postgres), measurement{rushgate: r.rushgate, ceiling: r.ceiling, concurrency: 64})
	return r
}

func TestReport_CountsA429AsShedLoadAMissedTargetNotAnInvariantFailure(t *testing.T) {
	t.Parallel()
	r := hotReport(t)
	var out strings.Builder
	require.NoError(t, r.write(&out))
	text := out.String()

	assert.Empty(t, r.failures(), "429s and missed targets do not fail the run")
	assert.True(t, r.invariant.holds())
	for _, want := range []string{
		"rushgate-load crew-hot · postgres · 2 instances · 4 users → 1 crew of 4 seats · concurrency 64 · run abcd1234",
		"rushgate (HTTP)",
		"ceiling (database/sql)",
		"status 201 Created",
		"MISS: goodput ÷ ceiling (201s/s ÷ commits/s) 0.19×, target ≥ 4.00× at c=64", // 3/s against 16/s
		"MISS: 429 too many requests 1, target 0",
	} {
		assert.Contains(t, text, want)
	}
	assert.Regexp(t, `requests per instance\s+2 / 2`, text)
	assert.Regexp(t, `429 too many requests\s+1\s+0\s+MISS`, text)
	assert.Regexp(t, `latency p99\s+40\.00 ms\s+4\.00 ms\s+≤ 300 ms\s+PASS`, text)
	assert.Regexp(t, `goodput ÷ ceiling \(201s/s ÷ commits/s\)\s+0\.19×\s+≥ 4\.00× at c=64\s+MISS`, text)
	assert.Regexp(t, `expected: users answered 201\s+3`, text)
	assert.Regexp(t, `invariant\s+PASS`, text)
	assert.Contains(t, text, "result: PASS · targets: 1 PASS, 2 MISS")
	assert.NotContains(t, text, "status 429", "429s have their own row")
	assert.NotContains(t, text, "FAIL")
}

func TestReport_FailsOn5xxTransportErrorsAndInvariantViolations(t *testing.T) {
	t.Parallel()
	r := hotReport(t)
	r.rushgate = statsOf([]attempt{
		{latency: ms(1), status: 503, detail: `{"error":"UNAVAILABLE"}`},
		{latency: ms(2), err: errors.New("timeout")},
	}, time.Second)
	r.ceiling = nil
	r.invariant = summarizeCrews([]crewState{{id: "c1", currentMembers: 2, maxMembers: 1, memberIDs: []string{"u0", "u1"},
		sent: map[string]attempt{"u0": {status: 201}, "u1": {status: 201}}}})
	r.verdicts = judgeAll([]target{{measure: measureGoodputRatio, bound: atLeast, limit: 2}}, measurement{rushgate: r.rushgate})

	var out strings.Builder
	require.NoError(t, r.write(&out))
	text := out.String()

	assert.Contains(t, text, "result: FAIL")
	assert.Contains(t, text, `FAIL: 1 responses were 5xx; first 503: {"error":"UNAVAILABLE"}`)
	assert.Contains(t, text, "FAIL: 1 requests got no response; first: timeout")
	assert.Contains(t, text, "FAIL: crew c1: count(crew_members) 2 > maxMembers 1")
	assert.Contains(t, text, "not judged: goodput ÷ ceiling (201s/s ÷ commits/s): no ceiling run")
	assert.NotContains(t, text, "ceiling (database/sql)", "--no-ceiling leaves the ceiling column out")
}

func TestReport_SummaryRowHasTheHeadlineP99429sAndInvariant(t *testing.T) {
	t.Parallel()
	row := hotReport(t).summaryRow()
	require.Len(t, row, len(summaryHeader))
	assert.Equal(t, []string{
		"crew-hot", "postgres", "2", "goodput÷ceiling", "0.19×", "≥ 4.00× at c=64 MISS", "40.00 ms PASS", "1", "PASS", "PASS",
	}, row)
}

func TestAppendSummary_WritesTheHeaderOnceThenOneLinePerRun(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/summary.tsv"
	require.NoError(t, appendSummary(path, hotReport(t).summaryRow()))
	require.NoError(t, appendSummary(path, unrunRow(config{scenario: "crew-herd", databaseURL: "mysql://root@h/db", urls: []string{"a", "b"}})))

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	require.Len(t, lines, 3)
	assert.Equal(t, strings.Join(summaryHeader, "\t"), lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "crew-hot\tpostgres\t2\t"))
	assert.Equal(t, "crew-herd\tmysql\t2\t-\t-\t-\t-\t-\t-\tcould not run", lines[2])
}

func TestUnrunRow_NamesTheDialectAsARunDoesAndNeverTheURL(t *testing.T) {
	t.Parallel()
	cases := []struct{ url, want string }{
		{"postgresql://u:secret@h:5432/db", "postgres"},
		{"mysql://u:secret@h:3306/db", "mysql"},
		{"u:secret@h/db", "-"},
	}
	for _, c := range cases {
		row := unrunRow(config{scenario: "crew-hot", databaseURL: c.url, urls: []string{"a"}})
		assert.Equal(t, c.want, row[1], c.url)
		assert.NotContains(t, strings.Join(row, "\t"), "secret", c.url)
	}
}
