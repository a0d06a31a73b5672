package e2e

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/rushgate/rushgate/test/testenv"
)

// TestJoin_TwoInstancesOnRedisClusterFillExactly: two servers on one Postgres database and one
// Redis Cluster of three masters split a stampede. The crew's lock and its waiting flag share a
// slot, the users' idempotency records spread over the masters, and release notices cross
// nodes; the crew fills exactly, the rest are CREW_FULL, and nothing answers 429.
func TestJoin_TwoInstancesOnRedisClusterFillExactly(t *testing.T) {
	const users, capacity = 300, 60
	shared := backend{name: "postgres+redis-cluster", databaseURL: testenv.Postgres(t).URL, redisURL: testenv.RedisCluster(t)}
	instances := []*server{startServer(t, shared), startServer(t, shared)}
	crewID := instances[0].createCrew(capacity)
	tokens := make([]string, users)
	for i := range tokens {
		tokens[i] = instances[0].token(fmt.Sprintf("cluster-%d", i))
	}

	counts, answers := fire(users, func(i int) response {
		return instances[i%2].do("POST", "/crews/"+crewID+"/join", tokens[i], "", "Idempotency-Key", instances[0].run+"cluster")
	})

	t.Logf("statuses: %v", counts)
	for _, a := range answers {
		if a.status != http.StatusCreated && (a.status != http.StatusBadRequest || a.str("error") != "CREW_FULL") {
			t.Fatalf("unexpected answer %d %s (all: %v)", a.status, a.raw, counts)
		}
	}
	if counts[http.StatusCreated] != capacity || counts[http.StatusBadRequest] != users-capacity {
		t.Fatalf("statuses %v, want %d × 201 and %d × 400", counts, capacity, users-capacity)
	}
	if st := instances[1].stored(crewID); st.currentMembers != capacity || st.members != capacity || st.distinctUsers != capacity {
		t.Fatalf("invariant broken: %+v", st)
	}
}
