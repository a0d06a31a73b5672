package redis_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rgredis "github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// slowRedis starts a Redis of the test's own, so that no script is in its cache yet, behind a
// link whose every round trip costs roundTrip, and returns a client of it with timeout as every
// timeout.
func slowRedis(t *testing.T, roundTrip, timeout time.Duration, poolSize int) goredis.UniversalClient {
	t.Helper()
	proxy := testkit.StartSlowProxy(t, testenv.StartPrivateRedis(t).Addr)
	proxy.SetDelay(roundTrip)
	client, err := rgredis.NewClient("redis://"+proxy.Addr(), rgredis.Options{
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolSize: poolSize,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// Released waits on nothing: the release-notice subscription of a Locker is opened in the
// background when it is made, and Released used to open it, waiting for Redis to confirm it (up
// to a second) while holding the notices' mutex. The release is still heard by a waiter whose
// attempt found the key held.
func TestLocker_ReleasedWaitsForNoRoundTrip(t *testing.T) {
	t.Parallel()
	const roundTrip = 200 * time.Millisecond
	ctx := context.Background()
	client := slowRedis(t, roundTrip, 2*time.Second, 4)
	owner, waiter := rgredis.NewLocker(client), rgredis.NewLocker(client)
	t.Cleanup(func() { _ = owner.Close(); _ = waiter.Close() })
	key := "test:" + rand.Text()
	held, err := owner.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)

	started := time.Now()
	released, stop := waiter.Released(key)
	defer stop()
	assert.Less(t, time.Since(started), roundTrip/2, "Released waits for no round trip")

	_, err = waiter.TryAcquire(ctx, key, time.Minute)
	require.ErrorIs(t, err, ports.ErrLockNotAcquired)
	require.NoError(t, held.Release(ctx))
	select {
	case <-released:
	case <-time.After(noticeBound):
		t.Fatal("the waiter heard no release")
	}
}
