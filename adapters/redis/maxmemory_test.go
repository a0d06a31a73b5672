package redis_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rgredis "github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
)

// TestAtMaxmemory_NoLockOrRecordIsReportedTakenOrLeftBehind: under noeviction at maxmemory
// Redis refuses writes ("OOM command not allowed"). A lock attempt and an idempotency key's
// begin are then ErrUnavailable (a 503), never a lock or a key reported taken, nor contention
// (ErrLockNotAcquired, a 429 after seconds of backoff), and leave no key behind; once maxmemory
// is raised both succeed on the same client.
func TestAtMaxmemory_NoLockOrRecordIsReportedTakenOrLeftBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	redis := testenv.StartPrivateRedis(t)
	client := newTestClientOf(t, redis.URL)
	require.NoError(t, rgredis.WarmUp(ctx, client))
	locker, store := rgredis.NewLocker(client), rgredis.NewIdempotencyStore(client, "rushgate:")
	t.Cleanup(func() { _ = locker.Close() })
	lockKey, idempotencyKey := "test:"+rand.Text(), ports.IdempotencyKey{Scope: "user", Key: rand.Text()}

	require.NoError(t, client.ConfigSet(ctx, "maxmemory", "1").Err())
	lock, err := locker.TryAcquire(ctx, lockKey, time.Minute)
	assert.Nil(t, lock)
	assert.ErrorIs(t, err, ports.ErrUnavailable)
	assert.False(t, errors.Is(err, ports.ErrLockNotAcquired), "an OOM refusal is not contention: %v", err)
	assert.Contains(t, err.Error(), "OOM")
	_, err = store.Begin(ctx, idempotencyKey, "fingerprint", time.Minute, time.Hour)
	assert.ErrorIs(t, err, ports.ErrUnavailable)
	keys, err := client.Keys(ctx, "*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys, "keys written at maxmemory")

	require.NoError(t, client.ConfigSet(ctx, "maxmemory", "0").Err())
	lock, err = locker.TryAcquire(ctx, lockKey, time.Minute)
	require.NoError(t, err, "the lock once Redis has room")
	require.NoError(t, lock.Release(ctx))
	begun, err := store.Begin(ctx, idempotencyKey, "fingerprint", time.Minute, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, ports.BeginStarted, begun.State, "the key refused at maxmemory was never taken")
}
