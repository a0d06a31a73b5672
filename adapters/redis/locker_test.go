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
)

// noticeBound is how long a release notice may take to cross a Redis shared with other work.
const noticeBound = testenv.DependencyTimeout

func newTestClient(t *testing.T) goredis.UniversalClient {
	t.Helper()
	return newTestClientOf(t, "redis://"+testenv.RedisAddr(t))
}

// newTestClientOf is a client of the Redis at redisURL, closed when the test ends.
func newTestClientOf(t *testing.T, redisURL string) goredis.UniversalClient {
	t.Helper()
	client, err := rgredis.NewClient(redisURL, rgredis.Options{DialTimeout: testenv.DependencyTimeout, ReadTimeout: testenv.DependencyTimeout, WriteTimeout: testenv.DependencyTimeout})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// heldByAnother answers a Locker of client and a fresh key that another Locker of client holds
// for a minute, with that lock; both Lockers close when the test ends.
func heldByAnother(t *testing.T, client goredis.UniversalClient) (*rgredis.Locker, string, ports.Lock) {
	t.Helper()
	owner, waiter := rgredis.NewLocker(client), rgredis.NewLocker(client)
	t.Cleanup(func() { _ = owner.Close(); _ = waiter.Close() })
	key := "test:" + rand.Text()
	held, err := owner.TryAcquire(context.Background(), key, time.Minute)
	require.NoError(t, err)
	return waiter, key, held
}

// TestLockerClose_EndsReleaseNotices: after Close a Locker's listeners, old and new, hear no
// more releases, while a Locker still open hears the same release, which proves it was sent.
// Close may be called again.
func TestLockerClose_EndsReleaseNotices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	closed, open, releaser := rgredis.NewLocker(newTestClient(t)), rgredis.NewLocker(newTestClient(t)), rgredis.NewLocker(newTestClient(t))
	t.Cleanup(func() { _ = open.Close() })
	key := "test:" + rand.Text()
	before, stopBefore := closed.Released(key)
	defer stopBefore()
	heard, stopHeard := open.Released(key)
	defer stopHeard()

	require.NoError(t, closed.Close())
	after, stopAfter := closed.Released(key)
	defer stopAfter()
	held, err := releaser.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	_, err = open.TryAcquire(ctx, key, time.Minute)
	require.ErrorIs(t, err, ports.ErrLockNotAcquired, "the open Locker waits for the key")
	require.NoError(t, held.Release(ctx))

	select {
	case <-heard:
	case <-time.After(noticeBound):
		t.Fatal("the open Locker heard no notice")
	}
	for name, ch := range map[string]<-chan struct{}{"registered before Close": before, "registered after Close": after} {
		select {
		case <-ch:
			t.Errorf("listener %s was notified", name)
		default:
		}
	}
	assert.NoError(t, closed.Close(), "second Close")
	assert.NoError(t, releaser.Close(), "Close of a Locker no listener used")
}

// watchReleases returns a Locker, a fresh key, and the release channel of that key as seen by a
// subscription of the test's own, confirmed before it returns: next returns the channel's next
// message, and mark publishes "marker" on it, so that a test can prove nothing came before.
func watchReleases(t *testing.T) (locker *rgredis.Locker, key string, next func() string, mark func()) {
	t.Helper()
	ctx := context.Background()
	client := newTestClient(t)
	key = "test:" + rand.Text()
	channel := "rushgate:lock-released:" + key
	watch := client.Subscribe(ctx, channel)
	t.Cleanup(func() { _ = watch.Close() })
	_, err := watch.Receive(ctx) // the subscription is confirmed
	require.NoError(t, err)
	messages := watch.Channel()
	next = func() string {
		t.Helper()
		select {
		case msg := <-messages:
			return msg.Payload
		case <-time.After(noticeBound):
			t.Fatal("no message")
			return ""
		}
	}
	mark = func() {
		t.Helper()
		require.NoError(t, client.Publish(ctx, channel, "marker").Err())
	}
	locker = rgredis.NewLocker(client)
	t.Cleanup(func() { _ = locker.Close() }) // its release-notice subscription
	return locker, key, next, mark
}

// TestLockerRelease_AnnouncesOnlyAnActualRelease: a Release that finds the key no longer its own
// publishes nothing (the next message is the marker sent after it), and the owner's Release
// publishes once a TryAcquire found the key taken.
func TestLockerRelease_AnnouncesOnlyAnActualRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	locker, key, next, mark := watchReleases(t)

	stale, err := locker.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	require.NoError(t, stale.Release(ctx))
	owner, err := locker.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	_, err = locker.TryAcquire(ctx, key, time.Minute)
	require.ErrorIs(t, err, ports.ErrLockNotAcquired, "a waiter flags the key")
	require.ErrorIs(t, stale.Release(ctx), ports.ErrLockNotHeld)
	mark()

	assert.Equal(t, "marker", next(), "the failed release published nothing before the marker")
	require.NoError(t, owner.Release(ctx))
	assert.NotEqual(t, "marker", next(), "the owner's release is announced")
}

// TestLockerRelease_AnnouncesNothingWhenNobodyWaited: an uncontended key's release costs no
// Pub/Sub message; the marker the test sends after it is the first message.
func TestLockerRelease_AnnouncesNothingWhenNobodyWaited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	locker, key, next, mark := watchReleases(t)

	held, err := locker.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	require.NoError(t, held.Release(ctx))
	mark()

	assert.Equal(t, "marker", next(), "an uncontended release was announced")
}

// TestLocker_AnAttemptOnAFrozenServerCostsOneCallTimeout: with a seat lock's 5 s TTL an attempt
// may take half of it, but against a Redis that does not answer it fails after one call's
// timeout, not after the SET's and redsync's cleanup's in a row.
func TestLocker_AnAttemptOnAFrozenServerCostsOneCallTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 2 * time.Second // its half, a second, is room for a busy runner
	client, err := rgredis.NewClient("redis://"+frozenServer(t), rgredis.Options{
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	locker := rgredis.NewLocker(client)
	t.Cleanup(func() { _ = locker.Close() })

	started := time.Now()
	_, err = locker.TryAcquire(context.Background(), "seat:frozen", 5*time.Second)
	took := time.Since(started)
	require.ErrorIs(t, err, ports.ErrUnavailable)
	// Half a timeout for scheduling; the cleanup's timeout on top would exceed it.
	assert.Less(t, took, timeout+timeout/2)
}

// A Locker whose release-notice subscription Redis refuses (its user may use no channel) waits
// for the subscription in one contended attempt, within that attempt's budget, and not in every
// contended attempt after it: those go on at once, their waiters left to their backoff.
func TestLocker_ARefusedSubscriptionCostsOneAttemptItsWait(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second // an attempt's budget is half of it; its quarter is room for a busy runner
	ctx := context.Background()
	client := newTestClientOf(t, testenv.StartPrivateRedis(t).URL)
	require.NoError(t, client.Do(ctx, "ACL", "SETUSER", "default", "resetchannels").Err())
	waiter, key, _ := heldByAnother(t, client)

	attempt := func() time.Duration {
		started := time.Now()
		_, err := waiter.TryAcquire(ctx, key, ttl)
		require.ErrorIs(t, err, ports.ErrLockNotAcquired)
		return time.Since(started)
	}
	first, second := attempt(), attempt()
	t.Logf("contended attempts with the subscription refused: %v, then %v", first, second)
	assert.Less(t, first, ttl/2+ttl/4, "the first attempt waits its budget at most")
	assert.Less(t, second, ttl/4, "the next attempt does not wait for the subscription")
}
