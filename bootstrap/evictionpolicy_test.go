package bootstrap

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/adapters/telemetry"
)

// TestReportEvictionPolicies_AnEvictingMasterIsAnErrorAndAZeroGauge: each master read is a
// series of rushgate_redis_eviction_policy_safe (1 under noeviction, 0 otherwise); one that may
// evict is logged at error, naming it, its policy and the fix; masters that could not be read
// are one warning and no series.
func TestReportEvictionPolicies_AnEvictingMasterIsAnErrorAndAZeroGauge(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	reg := prometheus.NewRegistry()
	metrics := telemetry.NewMetrics(reg)

	reportEvictionPolicies([]redis.MemoryPolicy{
		{Node: "10.0.0.1:6379", Policy: "noeviction", MaxMemory: 1 << 30},
		{Node: "10.0.0.2:6379", Policy: "volatile-lru", MaxMemory: 1 << 30},
	}, errors.New("redis: read maxmemory-policy: 10.0.0.3:6379: ERR unknown command 'CONFIG'"), log, metrics)

	want := `
# HELP rushgate_redis_eviction_policy_safe 1 if the Redis master's maxmemory-policy, read at start, is noeviction; 0 if it may evict locks, idempotency records or waiting-room keys.
# TYPE rushgate_redis_eviction_policy_safe gauge
rushgate_redis_eviction_policy_safe{node="10.0.0.1:6379",policy="noeviction"} 1
rushgate_redis_eviction_policy_safe{node="10.0.0.2:6379",policy="volatile-lru"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rushgate_redis_eviction_policy_safe"); err != nil {
		t.Error(err)
	}
	var lines []map[string]any
	for line := range strings.Lines(logs.String()) {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
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
