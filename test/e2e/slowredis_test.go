package e2e

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// On a Redis whose every round trip takes 0.6 of RUSHGATE_REDIS_TIMEOUT, the server starts and
// its Redis calls answer, a crowd's on as many connections too: the start opened and handshook
// the client's pool and loaded the scripts. Before, every call on a connection it opened itself, the start's ping
// first, spent the handshake's round trip and its own, 1.2 timeouts, and failed.
func TestSlowRedis_CallsAnswerOnARedisSlowerThanHalfItsTimeout(t *testing.T) {
	t.Parallel()
	redisTimeout := bootstrap.DefaultConfig().Redis.Timeout
	proxy := testkit.StartSlowProxy(t, testenv.StartPrivateRedis(t).Addr)
	proxy.SetDelay(redisTimeout * 6 / 10)
	s := startServer(t, backend{name: "memory+redis", redisURL: "redis://" + proxy.Addr()}, productionTimeouts)
	// One event each: calls on one event are combined, and a call that waits behind another's
	// round trip is bounded from its arrival, so on this Redis it would not fit its timeout.
	const crowd = 8
	events := make([]string, crowd)
	for i := range events {
		events[i] = s.createEvent(fmt.Sprintf(`{"name":"slow redis %d","seats":10,"mode":"pull"}`, i))
	}

	counts, answers := fire(crowd, func(i int) response { return s.enter(events[i], "user") })
	if counts[http.StatusCreated] != crowd {
		for _, res := range answers {
			t.Logf("%d %s", res.status, res.raw)
		}
		t.Fatalf("entries answered %v, want %d × 201", counts, crowd)
	}
}
