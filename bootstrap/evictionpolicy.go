package bootstrap

import (
	"context"
	"log/slog"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/adapters/telemetry"
)

// evictionPolicyInterval is how often the Redis masters' maxmemory-policy is read again, so that
// a CONFIG SET shows in rushgate_redis_eviction_policy_safe without a restart: one CONFIG GET per
// master a minute.
const evictionPolicyInterval = time.Minute

// evictionPolicyWatch reads the Redis masters' maxmemory-policy at start and every
// evictionPolicyInterval, keeps rushgate_redis_eviction_policy_safe to the policies in effect and
// logs each change. The start goes on whatever it reads: a managed Redis may not let its policy be
// changed, and a Redis that evicts still serves until its memory is full.
type evictionPolicyWatch struct {
	client  goredis.UniversalClient
	timeout time.Duration
	log     *slog.Logger
	metrics *telemetry.Metrics
	// policies is each master's policy last reported: a change replaces its series and is logged
	// once.
	policies map[string]string
	// unchecked is whether the last read failed on a master, which was logged then.
	unchecked bool
}

func newEvictionPolicyWatch(client goredis.UniversalClient, timeout time.Duration, log *slog.Logger,
	metrics *telemetry.Metrics) *evictionPolicyWatch {
	return &evictionPolicyWatch{client: client, timeout: timeout, log: log, metrics: metrics, policies: map[string]string{}}
}

// check reads the policies, within the Redis timeout, and reports them.
func (w *evictionPolicyWatch) check(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	policies, err := redis.MemoryPolicies(ctx, w.client)
	w.report(policies, err)
}

// report records each master's policy in rushgate_redis_eviction_policy_safe, dropping the series
// of a policy no longer in effect, and logs a master newly under a policy that may evict at error
// and one back under noeviction at info. A master that did not answer CONFIG (disabled, renamed or
// denied by an ACL, or Redis down), err, keeps its last series; the first failure after a
// complete read is logged at warn. A master that a complete read no longer finds (a failover, a
// resharding) loses its series.
func (w *evictionPolicyWatch) report(policies []redis.MemoryPolicy, err error) {
	current := make(map[string]string, len(policies))
	for _, p := range policies {
		current[p.Node] = p.Policy
		w.metrics.RedisEvictionPolicyRead(p.Node, p.Policy, !p.Evicts())
		last, known := w.policies[p.Node]
		if known && last == p.Policy {
			continue
		}
		if known {
			w.metrics.RedisEvictionPolicyGone(p.Node, last)
		}
		attrs := []any{"node", p.Node, "maxmemoryPolicy", p.Policy}
		if known {
			attrs = append(attrs, "previousPolicy", last)
		}
		switch {
		case p.Evicts():
			w.log.Error("redis may evict rushgate's keys once its memory is full: a lock evicted lets a second request hold it "+
				"(mutual exclusion broken, silently), an idempotency record evicted lets a retry run again, a waiting room's "+
				"evicted key loses its line, entry tokens or sold-out mark; set maxmemory-policy noeviction (CONFIG SET and "+
				"redis.conf, or the managed service's parameter group), under which a full Redis refuses writes and requests "+
				"answer 503 until memory is freed", append(attrs, "maxmemory", p.MaxMemory, "evicts", evictedKeys(p.Policy))...)
		case known:
			w.log.Info("redis maxmemory-policy is noeviction now: rushgate's keys are no longer evicted", attrs...)
		}
	}
	for node, last := range w.policies {
		if _, read := current[node]; read {
			continue
		}
		if err != nil {
			current[node] = last
		} else {
			w.metrics.RedisEvictionPolicyGone(node, last)
		}
	}
	w.policies = current
	if err != nil && !w.unchecked {
		w.log.Warn("redis maxmemory-policy not checked: make sure it is noeviction, else a full Redis evicts locks, "+
			"idempotency records and waiting-room keys", "error", err)
	}
	w.unchecked = err != nil
}

// evictedKeys says which of rushgate's keys policy may evict.
func evictedKeys(policy string) string {
	if strings.HasPrefix(policy, "volatile-") {
		return "the keys with a TTL: every lock and idempotency record, and the waiting rooms' keys"
	}
	return "any key"
}
