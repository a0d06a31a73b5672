package contract_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	rgredis "github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
)

// TestRedisClusterLocker_ReleaseNoticeCrossesNodes: on a Redis Cluster a lock lives on the master
// of its hash tag's slot, while a Locker's one pattern subscription sits on the master of the
// pattern's slot. A release published by the script on one node reaches a waiter subscribed on
// another: the key is chosen so that the two masters differ, which the suite's random keys only
// do by chance.
func TestRedisClusterLocker_ReleaseNoticeCrossesNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testenv.RedisCluster(t)
	client := newRedisClientURL(t, url).(*goredis.ClusterClient)
	subscribedOn := masterFor(t, client, "rushgate:lock-released:*")
	key := "contract:" + rand.Text()
	for masterFor(t, client, "rushgate:lock:{"+key+"}") == subscribedOn {
		key = "contract:" + rand.Text()
	}

	owner, waiter := rgredis.NewLocker(newRedisClientURL(t, url)), rgredis.NewLocker(newRedisClientURL(t, url))
	t.Cleanup(func() { _ = owner.Close(); _ = waiter.Close() })
	held, err := owner.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	released, stop := waiter.Released(key)
	defer stop()
	_, err = waiter.TryAcquire(ctx, key, time.Minute)
	require.ErrorIs(t, err, ports.ErrLockNotAcquired)

	require.NoError(t, held.Release(ctx))

	select {
	case <-released:
	case <-time.After(testenv.DependencyTimeout):
		t.Fatal("the waiter subscribed on another node heard no release")
	}
}

// masterFor names the cluster master serving key's slot.
func masterFor(t *testing.T, c *goredis.ClusterClient, key string) string {
	t.Helper()
	master, err := c.MasterForKey(context.Background(), key)
	require.NoError(t, err)
	return master.Options().Addr
}
