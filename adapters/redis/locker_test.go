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

// noticeBound is how long a release notice may take to cross Redis.
const noticeBound = 2 * time.Second

func newTestClient(t *testing.T) goredis.UniversalClient {
	t.Helper()
	client, err := rgredis.NewClient("redis://"+testenv.RedisAddr(t), rgredis.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	return client
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
	assert.NoError(t, releaser.Close(), "Close of a Locker that never subscribed")
}

// TestLockerRelease_AnnouncesOnlyAnActualRelease watches the key's release channel directly: a
// Release that finds the key no longer its own publishes nothing (the next message is a marker
// the test sends after it), and the owner's Release publishes once a TryAcquire found the key
// taken.
func TestLockerRelease_AnnouncesOnlyAnActualRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := newTestClient(t)
	locker := rgredis.NewLocker(client)
	key := "test:" + rand.Text()
	channel := "rushgate:lock-released:" + key
	watch := client.Subscribe(ctx, channel)
	t.Cleanup(func() { _ = watch.Close() })
	_, err := watch.Receive(ctx) // the subscription is confirmed
	require.NoError(t, err)
	messages := watch.Channel()
	nextMessage := func() string {
		t.Helper()
		select {
		case msg := <-messages:
			return msg.Payload
		case <-time.After(noticeBound):
			t.Fatal("no message")
			return ""
		}
	}

	stale, err := locker.TryAcquire(ctx, key, 200*time.Millisecond)
	require.NoError(t, err)
	time.Sleep(600 * time.Millisecond)
	owner, err := locker.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	_, err = locker.TryAcquire(ctx, key, time.Minute)
	require.ErrorIs(t, err, ports.ErrLockNotAcquired, "a waiter flags the key")
	require.Error(t, stale.Release(ctx))
	require.NoError(t, client.Publish(ctx, channel, "marker").Err())

	assert.Equal(t, "marker", nextMessage(), "the failed release published nothing before the marker")
	require.NoError(t, owner.Release(ctx))
	assert.NotEqual(t, "marker", nextMessage(), "the owner's release is announced")
}

// TestLockerRelease_AnnouncesNothingWhenNobodyWaited: an uncontended key's release costs no
// Pub/Sub message; the marker the test sends after it is the first message.
func TestLockerRelease_AnnouncesNothingWhenNobodyWaited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := newTestClient(t)
	locker := rgredis.NewLocker(client)
	key := "test:" + rand.Text()
	channel := "rushgate:lock-released:" + key
	watch := client.Subscribe(ctx, channel)
	t.Cleanup(func() { _ = watch.Close() })
	_, err := watch.Receive(ctx)
	require.NoError(t, err)

	held, err := locker.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	require.NoError(t, held.Release(ctx))
	require.NoError(t, client.Publish(ctx, channel, "marker").Err())

	select {
	case msg := <-watch.Channel():
		assert.Equal(t, "marker", msg.Payload, "an uncontended release was announced")
	case <-time.After(noticeBound):
		t.Fatal("no message")
	}
}
