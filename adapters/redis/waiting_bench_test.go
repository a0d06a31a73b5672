package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/test/testenv"
)

// BenchmarkWaitingRoom is a crowd of 64 callers entering one event, then polling their place
// (users in random order, as a crowd's polls come), through the combined scripts: the Redis
// side of a pull entry and a status poll. rt/op is the script calls (round trips) per
// operation; redis-cpu-µs/op the CPU the Redis server spent per operation (its whole process:
// run it on a Redis nothing else uses).
func BenchmarkWaitingRoom(b *testing.B) {
	ctx := context.Background()
	client, err := NewClient("redis://"+testenv.RedisAddr(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close() })
	sent := newRoundTrips()
	client.AddHook(sent)
	w := NewWaitingRoom(client, "rushgate:bench:"+uuid.NewString()+":")
	event := uuid.NewString()
	if err := w.Open(ctx, event, 100, 100); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Del(context.WithoutCancel(ctx), w.keys(event)...).Err() })
	var entered atomic.Int64
	crowd := func(b *testing.B, op func(i int64) error) {
		b.ReportAllocs()
		b.SetParallelism(32) // 64 callers on 2 cores, as the load tool's crowd
		before, cpuBefore := sent.mark(), redisCPU(b, client)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := op(entered.Add(1)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(sent.mark()-before)/float64(b.N), "rt/op")
		b.ReportMetric(float64((redisCPU(b, client)-cpuBefore).Microseconds())/float64(b.N), "redis-cpu-µs/op")
	}
	b.Run("enter", func(b *testing.B) {
		crowd(b, func(i int64) error {
			_, err := w.Enter(ctx, event, fmt.Sprint("user-", i))
			return err
		})
	})
	total := entered.Load()
	// The server's step at the default idle timeout: a crowd polling again within it writes no
	// sign of life.
	const signStep = 15 * time.Second
	b.Run("position", func(b *testing.B) {
		crowd(b, func(int64) error {
			_, err := w.Position(ctx, event, fmt.Sprint("user-", 1+rand.Int64N(total)), time.Minute, signStep)
			return err
		})
	})
	b.Run("ping", func(b *testing.B) {
		crowd(b, func(int64) error { return client.Ping(ctx).Err() })
	})
}

// redisCPU is the CPU time the Redis server has used, user and system, from INFO cpu.
func redisCPU(b *testing.B, client goredis.UniversalClient) time.Duration {
	b.Helper()
	info, err := client.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var seconds float64
	for line := range strings.Lines(info) {
		name, value, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				b.Fatalf("INFO cpu: %s: %v", line, err)
			}
			seconds += v
		}
	}
	return time.Duration(seconds * float64(time.Second))
}
