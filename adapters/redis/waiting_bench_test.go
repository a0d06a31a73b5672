package redis

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/test/testenv"
)

// BenchmarkWaitingRoom is a crowd of 64 callers entering one event, then polling their place,
// through the combined scripts: the Redis side of a pull entry and a status poll. rt/op is the
// script calls (round trips) per operation.
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
		before := sent.mark()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := op(entered.Add(1)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(sent.mark()-before)/float64(b.N), "rt/op")
	}
	b.Run("enter", func(b *testing.B) {
		crowd(b, func(i int64) error {
			_, err := w.Enter(ctx, event, fmt.Sprint("user-", i))
			return err
		})
	})
	total := entered.Load()
	var next atomic.Int64
	b.Run("position", func(b *testing.B) {
		crowd(b, func(int64) error {
			_, err := w.Position(ctx, event, fmt.Sprint("user-", 1+next.Add(1)%total), time.Minute)
			return err
		})
	})
	b.Run("ping", func(b *testing.B) {
		crowd(b, func(int64) error { return client.Ping(ctx).Err() })
	})
}
