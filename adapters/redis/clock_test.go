package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rgredis "github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
)

// agreement is how close a synced clock's Now must be to Redis's TIME: the bracketing reads of
// Now take a round trip each, which a machine busy with other tests stretches.
const agreement = 50 * time.Millisecond

// offsetBy is a local clock set d apart from the machine's.
func offsetBy(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(d) }
}

// requireAgreesWithRedis checks that clock's Now brackets Redis's TIME within agreement.
func requireAgreesWithRedis(t *testing.T, client goredis.UniversalClient, clock *rgredis.SharedClock) {
	t.Helper()
	for range 3 {
		before := clock.Now()
		redisTime, err := client.Time(context.Background()).Result()
		require.NoError(t, err)
		after := clock.Now()
		require.False(t, redisTime.Before(before.Add(-agreement)) || redisTime.After(after.Add(agreement)),
			"Redis TIME %s outside [%s, %s] ± %s", redisTime.UTC(), before, after, agreement)
	}
}

// TestSharedClock_InstancesApartAgreeOnRedisTime: two clocks whose local clocks are 10 s apart
// answer Redis's time once synced, and report their offsets.
func TestSharedClock_InstancesApartAgreeOnRedisTime(t *testing.T) {
	t.Parallel()
	client := newTestClient(t)
	behind := rgredis.NewSharedClock(client, offsetBy(-5*time.Second))
	ahead := rgredis.NewSharedClock(client, offsetBy(5*time.Second))

	for clock, want := range map[*rgredis.SharedClock]time.Duration{behind: 5 * time.Second, ahead: -5 * time.Second} {
		offset, err := clock.Sync(context.Background())
		require.NoError(t, err)
		assert.InDelta(t, want.Seconds(), offset.Seconds(), agreement.Seconds(), "offset")
		assert.InDelta(t, want.Seconds(), clock.Offset().Seconds(), agreement.Seconds(), "Offset")
		requireAgreesWithRedis(t, client, clock)
	}
	assert.InDelta(t, 0, ahead.Now().Sub(behind.Now()).Seconds(), agreement.Seconds())
}

// TestSharedClock_AnswersInUTCMicroseconds: Now is a ports.Clock's time, before a Sync (the local
// clock's) and after.
func TestSharedClock_AnswersInUTCMicroseconds(t *testing.T) {
	t.Parallel()
	clock := rgredis.NewSharedClock(newTestClient(t), offsetBy(time.Hour))
	check := func() {
		now := clock.Now()
		assert.Equal(t, time.UTC, now.Location())
		assert.Equal(t, now, now.Truncate(time.Microsecond))
	}
	check()
	assert.WithinDuration(t, time.Now().Add(time.Hour), clock.Now(), time.Second, "before a Sync, the local clock")
	assert.Zero(t, clock.Offset())
	_, err := clock.Sync(context.Background())
	require.NoError(t, err)
	check()
}

// TestSharedClock_RedisDownKeepsTheLastOffset: a Sync that cannot reach Redis fails as
// unavailable, and Now goes on with the offset measured before.
func TestSharedClock_RedisDownKeepsTheLastOffset(t *testing.T) {
	t.Parallel()
	redis := testenv.StartPrivateRedis(t)
	client := newTestClientOf(t, redis.URL)
	clock := rgredis.NewSharedClock(client, offsetBy(-5*time.Second))
	_, err := clock.Sync(context.Background())
	require.NoError(t, err)
	requireAgreesWithRedis(t, client, clock)

	require.NoError(t, client.Close())
	offset, err := clock.Sync(context.Background())
	require.ErrorIs(t, err, ports.ErrUnavailable)
	assert.InDelta(t, 5, offset.Seconds(), agreement.Seconds(), "the offset kept")
	assert.WithinDuration(t, time.Now(), clock.Now(), agreement, "Now keeps the offset")
}

// TestSharedClock_OnACluster: on a Cluster the clock reads one master's TIME.
func TestSharedClock_OnACluster(t *testing.T) {
	t.Parallel()
	cluster := newTestClientOf(t, testenv.RedisCluster(t))
	clock := rgredis.NewSharedClock(cluster, offsetBy(3*time.Second))
	offset, err := clock.Sync(context.Background())
	require.NoError(t, err)
	assert.InDelta(t, -3, offset.Seconds(), agreement.Seconds())
	requireAgreesWithRedis(t, cluster, clock)
}

func TestSharedClock_UnsupportedClient(t *testing.T) {
	t.Parallel()
	ring := goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"a": testenv.RedisAddr(t)}})
	t.Cleanup(func() { _ = ring.Close() })
	_, err := rgredis.NewSharedClock(ring, time.Now).Sync(context.Background())
	require.True(t, errors.Is(err, ports.ErrUnavailable), "%v", err)
}

// BenchmarkClock_Now compares a SharedClock's Now with the system clock's: the one atomic load
// and the arithmetic are its whole cost, no allocation.
func BenchmarkClock_Now(b *testing.B) {
	shared := rgredis.NewSharedClock(goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}), time.Now)
	b.Run("system", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = system.Clock{}.Now()
		}
	})
	b.Run("shared", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = shared.Now()
		}
	})
}
