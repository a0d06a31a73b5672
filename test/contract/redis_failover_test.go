package contract_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	rgredis "github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// failoverRecovery bounds how long after a Cluster is ok again, a replica promoted in place of
// a killed master, a client of NewClient's defaults takes to serve that master's slots again.
const failoverRecovery = 5 * time.Second

// TestRedisClusterLocker_AFailoverKeepsLocksFreeAndNoticesHeard kills the master holding a lock,
// replicated to its replica, and the Lockers' release-notice subscription, the moment before its
// owner releases it. The release, refused, goes on in the background: once the replica is
// promoted the lock is free within failoverRecovery, not at the end of its minute's TTL. The
// clients find the promoted master without waiting for go-redis's periodic reload, and the
// subscription is open again there: a release is heard by a waiter.
func TestRedisClusterLocker_AFailoverKeepsLocksFreeAndNoticesHeard(t *testing.T) {
	ctx := context.Background()
	cluster := testenv.StartFailoverCluster(t)
	client := func() goredis.UniversalClient { return newRedisClientOptions(t, cluster.URL, rgredis.Options{}) }
	owner, waiter := rgredis.NewLocker(client()), rgredis.NewLocker(client())
	t.Cleanup(func() { _ = owner.Close(); _ = waiter.Close() })
	// A key whose lock is on the master holding the subscription.
	onTarget := func() string {
		target := cluster.MasterOf(t, "rushgate:lock-released:*")
		for {
			if key := "failover:" + rand.Text(); cluster.MasterOf(t, "rushgate:lock:{"+key+"}") == target {
				return key
			}
		}
	}
	key := onTarget()
	held, err := owner.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	cluster.AwaitReplicated(t, "rushgate:lock:{"+key+"}")

	_, _, ok := cluster.KillMasterOf(t, key)
	require.ErrorIs(t, held.Release(ctx), ports.ErrUnavailable)
	testkit.Eventually(t, failoverRecovery+time.Until(ok), "the lock free once the replica took over", func() error {
		lock, err := waiter.TryAcquire(ctx, key, time.Minute)
		if err != nil {
			return err
		}
		return lock.Release(ctx)
	})
	t.Logf("the lock was free %v after the cluster was ok", time.Since(ok).Round(time.Millisecond))

	contended := onTarget()
	testkit.Eventually(t, failoverRecovery, "a release heard by a waiter after the failover", func() error {
		held, err := owner.TryAcquire(ctx, contended, time.Minute)
		if err != nil {
			return err
		}
		released, stop := waiter.Released(contended)
		defer stop()
		if _, err := waiter.TryAcquire(ctx, contended, time.Minute); err == nil {
			return fmt.Errorf("%s taken twice", contended)
		}
		if err := held.Release(ctx); err != nil {
			return err
		}
		select {
		case <-released:
			return nil
		case <-time.After(time.Second):
			return fmt.Errorf("no release notice")
		}
	})
}
