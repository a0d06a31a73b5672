package contract_test

import (
	"context"
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/memory"
	rgredis "github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/ports"
)

var lockerBackends = []backend[ports.Locker]{
	{"memory", func(*testing.T) ports.Locker { return memory.NewLocker(system.Clock{}) }},
	{"redis", func(t *testing.T) ports.Locker { return rgredis.NewLocker(redisClient(t)) }},
}

// shortLockTTL expires quickly yet leaves a Redis attempt (half the TTL) room for a fresh
// connection under -race; waitBeyondShortLockTTL surely outlasts it on any backend.
const (
	shortLockTTL           = 200 * time.Millisecond
	waitBeyondShortLockTTL = 600 * time.Millisecond
	longLockTTL            = time.Minute
)

func TestLockerContract(t *testing.T) {
	t.Parallel()
	runContract(t, lockerBackends, []contractCase[ports.Locker]{
		{"TryAcquire_TakesFreeKeyAndRefusesHeldKey", testLockerRefusesHeldKey},
		{"Release_FreesKey", testLockerReleaseFreesKey},
		{"TTL_ExpiryFreesKey", testLockerTTLExpiryFreesKey},
		{"Release_AfterExpiryAndTakeover_IsNotHeldAndSparesNewOwner", testLockerStaleReleaseSparesNewOwner},
		{"Release_Twice_IsNotHeld", testLockerReleaseTwice},
		{"TryAcquire_ConcurrentCallersGetExactlyOneLock", testLockerConcurrentAcquire},
	})
}

func testLockerRefusesHeldKey(t *testing.T, locker ports.Locker) {
	ctx := context.Background()
	key := "contract:" + rand.Text()

	held, err := locker.TryAcquire(ctx, key, longLockTTL)
	require.NoError(t, err)

	_, err = locker.TryAcquire(ctx, key, longLockTTL)
	require.ErrorIs(t, err, ports.ErrLockNotAcquired)

	other, err := locker.TryAcquire(ctx, key+":other", longLockTTL)
	require.NoError(t, err, "another key is independent")

	require.NoError(t, held.Release(ctx))
	require.NoError(t, other.Release(ctx))
}

func testLockerReleaseFreesKey(t *testing.T, locker ports.Locker) {
	ctx := context.Background()
	key := "contract:" + rand.Text()

	first, err := locker.TryAcquire(ctx, key, longLockTTL)
	require.NoError(t, err)
	require.NoError(t, first.Release(ctx))

	second, err := locker.TryAcquire(ctx, key, longLockTTL)
	require.NoError(t, err, "a released key is free at once")
	require.NoError(t, second.Release(ctx))
}

func testLockerTTLExpiryFreesKey(t *testing.T, locker ports.Locker) {
	ctx := context.Background()
	key := "contract:" + rand.Text()

	_, err := locker.TryAcquire(ctx, key, shortLockTTL)
	require.NoError(t, err)
	_, err = locker.TryAcquire(ctx, key, longLockTTL)
	require.ErrorIs(t, err, ports.ErrLockNotAcquired, "held until its TTL")

	time.Sleep(waitBeyondShortLockTTL)

	next, err := locker.TryAcquire(ctx, key, longLockTTL)
	require.NoError(t, err, "a crashed holder's lock frees itself after its TTL")
	require.NoError(t, next.Release(ctx))
}

func testLockerStaleReleaseSparesNewOwner(t *testing.T, locker ports.Locker) {
	ctx := context.Background()
	key := "contract:" + rand.Text()

	stale, err := locker.TryAcquire(ctx, key, shortLockTTL)
	require.NoError(t, err)
	time.Sleep(waitBeyondShortLockTTL)
	require.ErrorIs(t, stale.Release(ctx), ports.ErrLockNotHeld, "expired, nobody else yet")

	owner, err := locker.TryAcquire(ctx, key, longLockTTL)
	require.NoError(t, err)
	require.ErrorIs(t, stale.Release(ctx), ports.ErrLockNotHeld, "another owner holds it")

	_, err = locker.TryAcquire(ctx, key, longLockTTL)
	require.ErrorIs(t, err, ports.ErrLockNotAcquired, "the stale release left the new owner's lock alone")
	require.NoError(t, owner.Release(ctx))
}

func testLockerReleaseTwice(t *testing.T, locker ports.Locker) {
	ctx := context.Background()
	held, err := locker.TryAcquire(ctx, "contract:"+rand.Text(), longLockTTL)
	require.NoError(t, err)
	require.NoError(t, held.Release(ctx))
	require.ErrorIs(t, held.Release(ctx), ports.ErrLockNotHeld)
}

func testLockerConcurrentAcquire(t *testing.T, locker ports.Locker) {
	const callers = 50
	ctx := context.Background()
	key := "contract:" + rand.Text()

	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		locks   = make(chan ports.Lock, callers)
		refused = make(chan error, callers)
	)
	for range callers {
		wg.Go(func() {
			<-start
			held, err := locker.TryAcquire(ctx, key, longLockTTL)
			if err != nil {
				refused <- err
				return
			}
			locks <- held
		})
	}
	close(start)
	wg.Wait()
	close(locks)
	close(refused)

	require.Len(t, locks, 1, "exactly one caller holds the lock")
	for err := range refused {
		assert.ErrorIs(t, err, ports.ErrLockNotAcquired)
	}
	require.NoError(t, (<-locks).Release(ctx))
}

// TestRedisLocker_UnreachableRedisAnswersWithoutHanging checks the Locker's infrastructure
// sentences: a Redis that refuses connections is unavailable at once; an attempt that gets no
// answer within half the TTL counts as not acquired (the guard backs off), never a hang.
func TestRedisLocker_UnreachableRedisAnswersWithoutHanging(t *testing.T) {
	t.Parallel()
	want := map[string]error{"refusing": ports.ErrUnavailable, "silent": ports.ErrLockNotAcquired}
	for name, addr := range deadRedisAddrs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			locker := rgredis.NewLocker(newRedisClient(t, addr))

			started := time.Now()
			_, err := locker.TryAcquire(context.Background(), "contract:"+rand.Text(), time.Second)
			elapsed := time.Since(started)

			require.NotNil(t, want[name], "no expectation for %s", name)
			require.ErrorIs(t, err, want[name])
			assert.Less(t, elapsed, time.Second, "answered within the configured timeout")
		})
	}
}
