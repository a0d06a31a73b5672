package bootstrap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/adapters/telemetry"
	"github.com/rushgate/rushgate/test/testenv"
)

// TestReportEvictionPolicies_AnEvictingMasterIsAnErrorAndAZeroGauge: each master read is a
// series of rushgate_redis_eviction_policy_safe (1 under noeviction, 0 otherwise); one that may
// evict is logged at error, naming it, its policy and the fix; masters that could not be read
// are one warning and no series.
func TestEvictionPolicyWatch_AnEvictingMasterIsAnErrorAndAZeroGauge(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	reg := prometheus.NewRegistry()
	metrics := telemetry.NewMetrics(reg)

	newEvictionPolicyWatch(nil, time.Second, log, metrics).report([]redis.MemoryPolicy{
		{Node: "10.0.0.1:6379", Policy: "noeviction", MaxMemory: 1 << 30},
		{Node: "10.0.0.2:6379", Policy: "volatile-lru", MaxMemory: 1 << 30},
	}, errors.New("redis: read maxmemory-policy: 10.0.0.3:6379: ERR unknown command 'CONFIG'"))

	want := `
# HELP rushgate_redis_eviction_policy_safe 1 if the Redis master's maxmemory-policy, read at start and every minute, is noeviction; 0 if it may evict locks, idempotency records or waiting-room keys.
# TYPE rushgate_redis_eviction_policy_safe gauge
rushgate_redis_eviction_policy_safe{node="10.0.0.1:6379",policy="noeviction"} 1
rushgate_redis_eviction_policy_safe{node="10.0.0.2:6379",policy="volatile-lru"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rushgate_redis_eviction_policy_safe"); err != nil {
		t.Error(err)
	}
	lines := logLines(t, &logs)
	if len(lines) != 2 {
		t.Fatalf("log lines: %s, want an error and a warning", logs.String())
	}
	evicting, unchecked := lines[0], lines[1]
	if evicting["level"] != "ERROR" || evicting["node"] != "10.0.0.2:6379" || evicting["maxmemoryPolicy"] != "volatile-lru" ||
		!strings.Contains(evicting["evicts"].(string), "every lock and idempotency record") ||
		!strings.Contains(evicting["msg"].(string), "set maxmemory-policy noeviction") ||
		!strings.Contains(evicting["msg"].(string), "mutual exclusion broken") {
		t.Errorf("the evicting master's line: %v", evicting)
	}
	if unchecked["level"] != "WARN" || !strings.Contains(unchecked["msg"].(string), "not checked") ||
		!strings.Contains(unchecked["error"].(string), "10.0.0.3:6379") {
		t.Errorf("the unchecked master's line: %v", unchecked)
	}
}

// TestEvictionPolicyWatch_FollowsAConfigSetWithoutARestart: each read of the policies (the
// watch's check, run at start and every evictionPolicyInterval) replaces a master's series when
// its policy changed, so the gauge follows a CONFIG SET to allkeys-lru (0) and back to noeviction
// (1) with no series left for the policy no longer in effect; the change to an evicting policy is
// one error, not one per read, and the way back one info line.
func TestEvictionPolicyWatch_FollowsAConfigSetWithoutARestart(t *testing.T) {
	ctx := context.Background()
	private := testenv.StartPrivateRedis(t)
	client := goredis.NewClient(&goredis.Options{Addr: private.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	setPolicy := func(policy string) {
		t.Helper()
		if err := client.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	watch := newEvictionPolicyWatch(client, 5*time.Second, slog.New(slog.NewJSONHandler(&logs, nil)),
		telemetry.NewMetrics(reg))
	gauge := func(policy, value string) string {
		return `
# HELP rushgate_redis_eviction_policy_safe 1 if the Redis master's maxmemory-policy, read at start and every minute, is noeviction; 0 if it may evict locks, idempotency records or waiting-room keys.
# TYPE rushgate_redis_eviction_policy_safe gauge
rushgate_redis_eviction_policy_safe{node="` + private.Addr + `",policy="` + policy + `"} ` + value + "\n"
	}
	step := func(name, policy, value string, wantLevels ...string) {
		t.Helper()
		logs.Reset()
		watch.check(ctx)
		if err := testutil.GatherAndCompare(reg, strings.NewReader(gauge(policy, value)),
			"rushgate_redis_eviction_policy_safe"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		var levels []string
		for _, l := range logLines(t, &logs) {
			levels = append(levels, l["level"].(string))
		}
		if strings.Join(levels, ",") != strings.Join(wantLevels, ",") {
			t.Errorf("%s: logged %s, want levels %v", name, logs.String(), wantLevels)
		}
	}

	setPolicy("noeviction")
	step("at start", "noeviction", "1")
	setPolicy("allkeys-lru")
	step("after CONFIG SET allkeys-lru", "allkeys-lru", "0", "ERROR")
	step("read again, unchanged", "allkeys-lru", "0")
	setPolicy("noeviction")
	step("after CONFIG SET noeviction", "noeviction", "1", "INFO")
}

// logLines decodes the JSON log lines written to logs.
func logLines(t *testing.T, logs *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for line := range strings.Lines(logs.String()) {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	return lines
}

// TestEvictionPolicyWatch_AMasterNoLongerReadLosesItsSeriesOnlyOnACompleteRead: a master a read
// could not reach keeps its series, and the failure is one warning however many reads fail; a
// master a complete read no longer finds (a failover moved writes elsewhere) loses it.
func TestEvictionPolicyWatch_AMasterNoLongerReadLosesItsSeriesOnlyOnACompleteRead(t *testing.T) {
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	watch := newEvictionPolicyWatch(nil, time.Second, slog.New(slog.NewJSONHandler(&logs, nil)), telemetry.NewMetrics(reg))
	old := redis.MemoryPolicy{Node: "10.0.0.1:6379", Policy: "volatile-lru"}
	promoted := redis.MemoryPolicy{Node: "10.0.0.2:6379", Policy: "noeviction"}
	unreachable := errors.New("redis: read maxmemory-policy: 10.0.0.1:6379: i/o timeout")

	watch.report([]redis.MemoryPolicy{old}, nil)
	watch.report(nil, unreachable)
	watch.report(nil, unreachable)
	if got := testutil.CollectAndCount(reg, "rushgate_redis_eviction_policy_safe"); got != 1 {
		t.Errorf("series after failed reads: %d, want the unreached master's 1", got)
	}
	watch.report([]redis.MemoryPolicy{promoted}, nil)
	want := `
# HELP rushgate_redis_eviction_policy_safe 1 if the Redis master's maxmemory-policy, read at start and every minute, is noeviction; 0 if it may evict locks, idempotency records or waiting-room keys.
# TYPE rushgate_redis_eviction_policy_safe gauge
rushgate_redis_eviction_policy_safe{node="10.0.0.2:6379",policy="noeviction"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rushgate_redis_eviction_policy_safe"); err != nil {
		t.Error(err)
	}
	var levels []string
	for _, l := range logLines(t, &logs) {
		levels = append(levels, l["level"].(string))
	}
	if strings.Join(levels, ",") != "ERROR,WARN" {
		t.Errorf("logged %s, want the evicting master's error and one warning", logs.String())
	}
}
