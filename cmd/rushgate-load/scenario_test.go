package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
)

// defaults are the flags' defaults.
var defaults = config{users: 2000, capacity: 100, concurrency: 64, crews: 200, orderItems: 100000, queueTick: time.Second}

func TestRegistry_EveryScenarioHasAUniqueNameAndBuildsFromTheDefaults(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []string{"crew-hot", "crew-herd", "crew-spread", "coupon-herd", "charge-herd", "cart-herd", "verification-flow", "queue-pull", "queue-push", "seat-herd", "payment-herd", "outbox-drain", "top-products", "raffle-entry", "prequeue-open", "prequeue-open-push", "soldout", "soldout-push"}, scenarioNames())
	seen := map[string]bool{}
	for _, r := range registry {
		assert.False(t, seen[r.name], "%s registered twice", r.name)
		seen[r.name] = true
		assert.NotEmpty(t, r.summary, r.name)
		assert.Contains(t, usage(), r.name, "the usage text lists %s", r.name)

		sc, err := r.build(defaults)
		require.NoError(t, err, r.name)
		assert.NotEmpty(t, sc.shape(), r.name)
		for _, d := range []gormdb.Dialect{gormdb.Postgres, gormdb.MySQL} {
			assert.NotEmpty(t, sc.targets(d), "%s is judged on something on %s", r.name, d)
		}
	}
}

func TestLookup_NamesTheKnownScenariosWhenItFails(t *testing.T) {
	t.Parallel()
	r, err := lookup("crew-herd")
	require.NoError(t, err)
	assert.Equal(t, "crew-herd", r.name)

	_, err = lookup("crew-stampede")
	assert.ErrorContains(t, err, `unknown scenario "crew-stampede": want one of crew-hot, crew-herd, crew-spread`)
}

// The report's ceiling column says what ran: a Redis or HTTP ceiling is not labelled
// database/sql.
func TestCeilingName_SaysWhatTheCeilingRuns(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"crew-hot":           "database/sql",
		"queue-pull":         "GET /healthz",
		"queue-push":         "GET /healthz",
		"soldout":            "GET /healthz",
		"soldout-push":       "GET /healthz",
		"prequeue-open-push": "GET /healthz",
	} {
		r, err := lookup(name)
		require.NoError(t, err)
		sc, err := r.build(defaults)
		require.NoError(t, err)
		assert.Equal(t, want, ceilingName(sc), name)
	}
}

func buildCrew(t *testing.T, name string, cfg config) *crewJoin {
	t.Helper()
	r, err := lookup(name)
	require.NoError(t, err)
	sc, err := r.build(cfg)
	require.NoError(t, err)
	return sc.(*crewJoin)
}

func TestCrewHot_IsOneCrewWithASeatPerUserJudgedOnThroughputAgainstTheHotRowCeiling(t *testing.T) {
	t.Parallel()
	hot := buildCrew(t, "crew-hot", defaults)
	assert.Equal(t, 1, hot.crews)
	assert.Equal(t, 2000, hot.capacity, "--capacity is crew-herd's; crew-hot seats everyone")
	assert.Equal(t, "2000 users → 1 crew of 2000 seats", hot.shape())

	want := func(ratio float64) []target {
		return []target{
			{measure: measureGoodputRatio, bound: atLeast, limit: ratio, concurrency: 64},
			{measure: measureP99, bound: atMost, limit: 300},
			{measure: measure429, bound: atMost, limit: 0},
		}
	}
	assert.Equal(t, want(4.0), hot.targets(gormdb.Postgres))
	assert.Equal(t, want(2.5), hot.targets(gormdb.MySQL))

	_, err := newCrewHot(config{users: maxCapacity + 1})
	assert.ErrorContains(t, err, "one crew holds at most")
}

func TestCrewHerd_IsJudgedOnTimeToFillAndP99NotOnRequestsPerSecond(t *testing.T) {
	t.Parallel()
	herd := buildCrew(t, "crew-herd", defaults)
	assert.Equal(t, "2000 users → 1 crew of 100 seats", herd.shape())

	targets := herd.targets(gormdb.Postgres)
	assert.Equal(t, measureTimeToFill, targets[0].measure, "time-to-fill is the headline")
	assert.Equal(t, 100, targets[0].grants)
	assert.Contains(t, targets, target{measure: measureP99, bound: atMost, limit: 300})
	for _, tg := range targets {
		assert.NotEqual(t, measureGoodputRatio, tg.measure)
	}

	small := buildCrew(t, "crew-herd", config{users: 10, capacity: 100})
	assert.Equal(t, 10, small.targets(gormdb.MySQL)[0].grants, "fewer users than seats fill only as many")

	_, err := newCrewHerd(config{users: 10, capacity: 0})
	assert.ErrorContains(t, err, "--capacity must be 1..")
}

func TestCrewSpread_SpreadsUsersRoundRobinWithASeatForEach(t *testing.T) {
	t.Parallel()
	spread := buildCrew(t, "crew-spread", config{users: 2001, crews: 200})
	assert.Equal(t, 11, spread.capacity, "each crew holds every user it is sent")
	assert.Equal(t, 11, spread.assigned(0))
	assert.Equal(t, 10, spread.assigned(1))
	assert.Equal(t, 0, spread.crewOf(200))
	total := 0
	for c := range spread.crews {
		total += spread.assigned(c)
	}
	assert.Equal(t, 2001, total)
	assert.Equal(t, []target{{measure: measureGoodputRatio, bound: atLeast, limit: 0.8}}, spread.targets(gormdb.Postgres))

	_, err := newCrewSpread(config{users: 10, crews: 0})
	assert.ErrorContains(t, err, "--crews must be at least 1")
}

func TestParseArgs_TakesFlagsOnEitherSideOfTheScenarioAndRepeatedURLs(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	cfg, err := parseArgs([]string{
		"--database-url", "postgres://x/db", "--jwt-secret", "s",
		"--url", "http://a:1/", "crew-hot", "--url", "http://b:2,http://c:3", "--users", "10",
	}, &stderr)
	require.NoError(t, err)
	assert.Equal(t, "crew-hot", cfg.scenario)
	assert.Equal(t, []string{"http://a:1", "http://b:2", "http://c:3"}, cfg.urls)
	assert.Equal(t, 10, cfg.users)
	assert.Equal(t, 64, cfg.concurrency)

	cfg, err = parseArgs([]string{"--database-url", "postgres://x/db", "--jwt-secret", "s", "crew-herd"}, &stderr)
	require.NoError(t, err)
	assert.Equal(t, []string{"http://127.0.0.1:8080"}, cfg.urls, "one instance by default")

	_, err = parseArgs([]string{"--url", "127.0.0.1:8080", "crew-herd"}, &stderr)
	assert.ErrorContains(t, err, "not an http(s) base URL")
}

func TestParseArgs_AScenarioRunsAtItsOwnSizeUnlessTheCommandLineGivesOne(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	cfg, err := parseArgs([]string{"--jwt-secret", "s", "coupon-herd"}, &stderr)
	require.NoError(t, err)
	assert.Equal(t, 10000, cfg.users, "coupon-herd's own size")
	assert.Equal(t, 100, cfg.capacity)

	cfg, err = parseArgs([]string{"--jwt-secret", "s", "coupon-herd", "--users", "50"}, &stderr)
	require.NoError(t, err)
	assert.Equal(t, 50, cfg.users, "the command line wins")

	cfg, err = parseArgs([]string{"--jwt-secret", "s", "crew-herd"}, &stderr)
	require.NoError(t, err)
	assert.Equal(t, 2000, cfg.users, "a scenario without defaults takes the flag's")
	assert.Contains(t, usage(), "(unless given: --capacity 100 --users 100000)")

	cfg, err = parseArgs([]string{"--jwt-secret", "s", "--url", "http://a:1,http://b:2", "queue-push", "--users-per-instance", "18000"}, &stderr)
	require.NoError(t, err)
	assert.Equal(t, 36000, cfg.users, "--users-per-instance × the instances, over the scenario's own size")
	_, err = parseArgs([]string{"--jwt-secret", "s", "queue-push", "--users", "5", "--users-per-instance", "18000"}, &stderr)
	assert.ErrorContains(t, err, "exclude each other")
}

func TestRun_ListPrintsTheRegistryWithoutADatabase(t *testing.T) {
	t.Parallel()
	var stdout, stderr strings.Builder
	passed, err := run(t.Context(), []string{"-list"}, &stdout, &stderr)
	require.NoError(t, err)
	assert.True(t, passed)
	assert.Equal(t, strings.Join(scenarioNames(), "\n")+"\n", stdout.String())
	assert.Empty(t, stderr.String())
}

func TestParseArgs_TheQueueTickIsTheServersUnlessGiven(t *testing.T) {
	var stderr strings.Builder
	t.Setenv("RUSHGATE_QUEUE_TICK", "")
	cfg, err := parseArgs([]string{"--jwt-secret", "s", "soldout"}, &stderr)
	require.NoError(t, err)
	assert.Equal(t, time.Second, cfg.queueTick, "the server's default")

	t.Setenv("RUSHGATE_QUEUE_TICK", "250ms")
	cfg, err = parseArgs([]string{"--jwt-secret", "s", "soldout"}, &stderr)
	require.NoError(t, err)
	assert.Equal(t, 250*time.Millisecond, cfg.queueTick, "the environment the servers run in")
	cfg, err = parseArgs([]string{"--jwt-secret", "s", "soldout", "--queue-tick", "2s"}, &stderr)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, cfg.queueTick, "the command line wins")

	t.Setenv("RUSHGATE_QUEUE_TICK", "soon")
	_, err = parseArgs([]string{"--jwt-secret", "s", "soldout"}, &stderr)
	assert.ErrorContains(t, err, "RUSHGATE_QUEUE_TICK")
}

// The objects a scenario creates through an admin route are read from the 201 alone: another
// status, or a 201 without what the scenario needs, stops its preparation with the answer.
func TestCreateByAdmin_ReadsThe201AndRefusesAnythingElse(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		status  int
		body    string
		want    created
		wantErr string
	}{
		"created":           {status: http.StatusCreated, body: `{"id":"r1","seedHash":"ab12"}`, want: created{ID: "r1", SeedHash: "ab12"}},
		"refused":           {status: http.StatusBadRequest, body: `{"error":"VALIDATION_FAILED"}`, wantErr: "answered 400"},
		"created, no id":    {status: http.StatusCreated, body: `{"name":"x"}`, wantErr: "answered 201"},
		"created, not JSON": {status: http.StatusCreated, body: `<html>`, wantErr: "answered 201"},
	} {
		e := eventServer(t, func(int64) (int, string) { return tc.status, tc.body })
		got, err := createByAdmin(context.Background(), e.api, 0, "admin", "/admin/raffles", map[string]any{})
		if tc.wantErr != "" {
			assert.ErrorContains(t, err, tc.wantErr, name)
			continue
		}
		require.NoError(t, err, name)
		assert.Equal(t, tc.want, got, name)
	}
}

// A raffle or a pre-queued event is created with its commitment: without a seedHash, the
// draw the run checks could not be tied to it.
func TestCreateCommitted_RefusesA201WithoutTheSeedHash(t *testing.T) {
	t.Parallel()
	e := eventServer(t, func(int64) (int, string) { return http.StatusCreated, `{"id":"e1"}` })

	_, err := createCommitted(context.Background(), e.api, "admin", "/admin/events", map[string]any{})
	assert.ErrorContains(t, err, "no seedHash")
}
