package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
)

// TestRedisAtMaxmemory_RefusesWith503AndServesOnceFreed fills a private Redis up to its
// maxmemory under noeviction, where Redis refuses every write with "OOM command not allowed":
// an idempotent join and charge (an idempotency script, then a lock), a coupon issue without a
// key (a lock alone), a waiting-room entry (a script) and a seat reservation (a lock) each answer
// 503 UNAVAILABLE with Retry-After within one Redis timeout, not 500, 429 or a hang. Nothing is
// half-written: Redis holds no key it did not hold before, and once maxmemory is raised, without
// a restart, the same requests (the same keys) are served as if first sent: no idempotency
// record left in progress, no lock left held, the refused entry not in line.
func TestRedisAtMaxmemory_RefusesWith503AndServesOnceFreed(t *testing.T) {
	redis := testenv.StartPrivateRedis(t)
	s := startServer(t, backend{name: "memory+redis", redisURL: redis.URL}, productionTimeouts)
	admin := goredis.NewClient(&goredis.Options{Addr: redis.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = admin.Close() })
	ctx := context.Background()
	if policy := admin.ConfigGet(ctx, "maxmemory-policy").Val()["maxmemory-policy"]; policy != "noeviction" {
		t.Fatalf("the private Redis' maxmemory-policy is %q, want noeviction", policy)
	}

	crewID := s.createCrew(100)
	if res := s.join(crewID, "before", "before"); res.status != http.StatusCreated {
		t.Fatalf("join: %d %s", res.status, res.raw)
	}
	s.createUser("payer", 1000)
	couponID := s.createCoupon(10)
	eventID := s.createEvent(`{"name":"full redis","seats":3,"slots":1,"mode":"pull"}`)
	entryToken := s.admit(eventID, "admitted")
	assertPlace(t, s.enter(eventID, "waiting-before"), http.StatusCreated, "waiting", 0, 1)

	before := allKeys(t, admin)
	if err := admin.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Set(ctx, "probe", "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("a SET at maxmemory: %v, want OOM", err)
	}

	bound := stallBound(bootstrap.DefaultConfig().Redis.Timeout, 0)
	refused := map[string]func() response{
		"join":    func() response { return s.join(crewID, "full", "full") },
		"charge":  func() response { return s.charge("payer", "100", "full") },
		"issue":   func() response { return s.issue(couponID, "payer") },
		"enter":   func() response { return s.enter(eventID, "full") },
		"reserve": func() response { return s.reserve(eventID, "1", "admitted", entryToken) },
	}
	for name, send := range refused {
		sent := time.Now()
		res := send()
		took := time.Since(sent)
		if res.status != http.StatusServiceUnavailable || res.str("error") != "UNAVAILABLE" || res.header.Get("Retry-After") == "" {
			t.Errorf("%s with Redis at maxmemory: %d %s, want 503 UNAVAILABLE with Retry-After", name, res.status, res.raw)
		}
		if took > bound {
			t.Errorf("%s with Redis at maxmemory took %v, want at most %v", name, took, bound)
		}
	}
	if after := allKeys(t, admin); !isSubset(after, before) {
		t.Errorf("keys written at maxmemory: %v", slices.DeleteFunc(after, func(k string) bool { return slices.Contains(before, k) }))
	}

	if err := admin.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	assertError(t, s.queueStatus(eventID, "full"), http.StatusNotFound, "NOT_IN_QUEUE")
	if res := s.join(crewID, "full", "full"); res.status != http.StatusCreated || res.num("currentMembers") != 2 ||
		res.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("the refused join again once Redis has room: %d %s, want 201 with 2 members, not replayed", res.status, res.raw)
	}
	if res := s.charge("payer", "100", "full"); res.status != http.StatusOK || res.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("the refused charge again: %d %s, want 200, not replayed", res.status, res.raw)
	}
	s.assertWallet("payer", 1100, 2)
	if res := s.issue(couponID, "payer"); res.status != http.StatusCreated {
		t.Errorf("the refused issue again: %d %s", res.status, res.raw)
	}
	s.assertIssued(couponID, 1)
	assertPlace(t, s.enter(eventID, "full"), http.StatusCreated, "waiting", 1, 2)
	if res := s.reserve(eventID, "1", "admitted", entryToken); res.status != http.StatusCreated {
		t.Errorf("the refused reservation again: %d %s", res.status, res.raw)
	}
}

// TestRedisEvictionPolicy_ReadAtStartIntoAGauge: a server started on a Redis whose
// maxmemory-policy may evict (volatile-lru: the keys with a TTL, every lock and idempotency
// record) starts, and exports rushgate_redis_eviction_policy_safe 0 for it; on one under
// noeviction, 1.
func TestRedisEvictionPolicy_ReadAtStartIntoAGauge(t *testing.T) {
	for policy, safe := range map[string]string{"volatile-lru": "0", "noeviction": "1"} {
		t.Run(policy, func(t *testing.T) {
			redis := testenv.StartPrivateRedis(t)
			admin := goredis.NewClient(&goredis.Options{Addr: redis.Addr, MaxRetries: -1})
			t.Cleanup(func() { _ = admin.Close() })
			if err := admin.ConfigSet(context.Background(), "maxmemory-policy", policy).Err(); err != nil {
				t.Fatal(err)
			}
			s := startServer(t, backend{name: "memory+redis", redisURL: redis.URL}, productionTimeouts)
			want := fmt.Sprintf("rushgate_redis_eviction_policy_safe{node=%q,policy=%q} %s", redis.Addr, policy, safe)
			if got := metricLines(t, s.url, "rushgate_redis_eviction_policy_safe"); !slices.Equal(got, []string{want}) {
				t.Errorf("/metrics: %q, want %q", got, want)
			}
		})
	}
}

// metricLines lists the sample lines of the Prometheus metric name on the /metrics of the
// server at baseURL.
func metricLines(t *testing.T, baseURL, name string) []string {
	t.Helper()
	res, err := http.Get(baseURL + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", baseURL, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	return lines
}

// allKeys lists every key of the Redis c talks to, sorted.
func allKeys(t *testing.T, c *goredis.Client) []string {
	t.Helper()
	keys, err := c.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

// isSubset reports whether every element of sub is in of.
func isSubset(sub, of []string) bool {
	for _, k := range sub {
		if !slices.Contains(of, k) {
			return false
		}
	}
	return true
}
