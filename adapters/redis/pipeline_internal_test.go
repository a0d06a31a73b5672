package redis

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

var (
	echoScript   = goredis.NewScript(`return ARGV[1]`)
	refuseScript = goredis.NewScript(`return redis.error_reply('REFUSED ' .. ARGV[1])`)
)

// Concurrent calls through a pipelined client reach Redis in far fewer round trips than there
// are calls, and each keeps its own answer: a script's value, a script's error, a SET NX taken
// or refused. On one Redis, and on a Redis Cluster, where one pipeline's calls live in different
// hash slots on different nodes.
func TestPipelined_ConcurrentCallsShareRoundTripsAndEachKeepsItsOwnAnswer(t *testing.T) {
	t.Run("redis", func(t *testing.T) { testPipelinedCalls(t, "redis://"+testenv.RedisAddr(t)) })
	t.Run("cluster", func(t *testing.T) { testPipelinedCalls(t, testenv.RedisCluster(t)) })
}

func testPipelinedCalls(t *testing.T, redisURL string) {
	client, trips := countingClient(t, redisURL)
	calls := withPipelining(client)
	ctx := context.Background()
	prefix := "rushgate:test:" + uuid.NewString() + ":"
	key := func(i int) string { return fmt.Sprintf("%s%d", prefix, i) }

	// Kinds by i % 4: echo, refuse, SET NX of a free key, SET NX of a key taken beforehand.
	const n = 400
	for i := 3; i < n; i += 4 {
		if err := client.Set(ctx, key(i), "earlier", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	mark := trips.mark()
	answers := make([]string, n)
	testkit.StartTogether(n, func(i int) {
		switch i % 4 {
		case 0:
			v, err := echoScript.Run(ctx, calls, []string{key(i)}, i).Text()
			answers[i] = fmt.Sprintf("%v %v", v, err)
		case 1:
			err := refuseScript.Run(ctx, calls, []string{key(i)}, i).Err()
			answers[i] = fmt.Sprint(err)
		default:
			taken, err := calls.SetNX(ctx, key(i), "mine", time.Minute).Result()
			answers[i] = fmt.Sprintf("%v %v", taken, err)
		}
	})
	for i, got := range answers {
		want := map[int]string{0: fmt.Sprintf("%d <nil>", i), 1: fmt.Sprintf("REFUSED %d", i), 2: "true <nil>", 3: "false <nil>"}[i%4]
		if got != want {
			t.Fatalf("call %d answered %q, want %q", i, got, want)
		}
	}
	sent := trips.since(mark)
	pipelines := 0
	for _, trip := range sent {
		if strings.Contains(trip, "+") {
			pipelines++
		}
	}
	t.Logf("%d calls in %d round trips, %d of them pipelines", n, len(sent), pipelines)
	if len(sent) > n/4 || pipelines == 0 {
		t.Fatalf("%d calls in %d round trips (%d pipelines), want at most %d", n, len(sent), pipelines, n/4)
	}
}
