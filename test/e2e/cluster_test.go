package e2e

import (
	"testing"

	"github.com/rushgate/rushgate/test/testenv"
)

// TestJoin_TwoInstancesOnRedisClusterFillExactly: two servers on one Postgres database and one
// Redis Cluster of three masters split a stampede. The crew's lock and its waiting flag share a
// slot, the users' idempotency records spread over the masters, and release notices cross
// nodes; the crew fills exactly, the rest are CREW_FULL, and nothing answers 429.
func TestJoin_TwoInstancesOnRedisClusterFillExactly(t *testing.T) {
	shared := backend{name: "postgres+redis-cluster", databaseURL: testenv.Postgres(t).URL, redisURL: testenv.RedisCluster(t)}
	stampede(t, []*server{startServer(t, shared), startServer(t, shared)}, 300, 60)
}
