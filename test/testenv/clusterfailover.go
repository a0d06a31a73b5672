package testenv

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/test/testkit"
)

// promotionLimit bounds, for setting a failover up, the wait for a killed master's replica to
// take over and for a restarted node to be in sync again. A promotion takes about twice
// clusterNodeTimeout; tests measure and bound it themselves.
const promotionLimit = 30 * time.Second

// FailoverCluster is a private Redis Cluster of three masters with one replica each, started for
// one test alone, so that it can kill a master and watch its replica take over.
type FailoverCluster struct {
	// URL is its address as adapters/redis.NewClient takes it: every node, masters first.
	URL string
	// NodeTimeout is its cluster-node-timeout: a master unreachable that long is marked failed
	// and its replica elected in its place.
	NodeTimeout time.Duration
	c           *redisCluster
}

// StartFailoverCluster starts a private Redis Cluster of three masters, each with a replica
// (redis-cli --cluster create --cluster-replicas 1), on free ports, with a cluster-node-timeout
// of NodeTimeout, and waits until every replica is in sync. It is stopped at the test's end. A
// missing redis-server or redis-cli is Unreachable.
func StartFailoverCluster(t testing.TB) *FailoverCluster {
	t.Helper()
	c := startRedisClusterOrFail(t, 1)
	t.Cleanup(c.stop)
	return &FailoverCluster{URL: c.url, NodeTimeout: clusterNodeTimeout, c: c}
}

// MasterOf returns the address of the master serving key's slot, as the live nodes agree.
func (f *FailoverCluster) MasterOf(t testing.TB, key string) string {
	t.Helper()
	var master string
	testkit.Eventually(t, promotionLimit, "the live nodes agree on the master of "+key, func() error {
		var err error
		master, err = f.agreedMaster(key)
		return err
	})
	return master
}

// KillMasterOf kills the master serving key's slot with SIGKILL and waits until a replica serves
// the slot in its place, every live node agreeing, and every live node reports cluster_state:ok.
// It returns the killed node's address, and when it was killed and when the cluster was ok
// again.
func (f *FailoverCluster) KillMasterOf(t testing.TB, key string) (killed string, at, ok time.Time) {
	t.Helper()
	killed = f.MasterOf(t, key)
	f.c.mu.Lock()
	node := f.c.nodes[killed]
	delete(f.c.nodes, killed)
	f.c.mu.Unlock()
	if err := node.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill the master %s: %v", killed, err)
	}
	at = time.Now()
	_ = node.Wait()
	testkit.Eventually(t, promotionLimit, "a replica takes over from "+killed, func() error {
		master, err := f.agreedMaster(key)
		if err != nil {
			return err
		}
		if master == killed {
			return fmt.Errorf("the slot of %s is still served by the killed %s", key, killed)
		}
		return f.everyLiveNode(func(ctx context.Context, node *goredis.Client) error {
			info, err := node.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return fmt.Errorf("%s: cluster state not ok", node.Options().Addr)
			}
			return nil
		})
	})
	return killed, at, time.Now()
}

// Restart starts a node KillMasterOf killed again on its port, from its nodes file: it rejoins
// the cluster as a replica of the node that took its slots, and Restart waits until it is in
// sync with it.
func (f *FailoverCluster) Restart(t testing.TB, addr string) {
	t.Helper()
	if err := f.c.startNode(addr); err != nil {
		t.Fatal(err)
	}
	node := goredis.NewClient(&goredis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	defer node.Close()
	testkit.Eventually(t, promotionLimit, addr+" rejoins as a replica in sync", func() error {
		info, err := node.Info(context.Background(), "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "role:slave") || !inSync(info, 1) {
			return fmt.Errorf("%s: %s", addr, info)
		}
		return nil
	})
}

// agreedMaster returns the address of the master serving key's slot when every live node says
// the same.
func (f *FailoverCluster) agreedMaster(key string) (string, error) {
	masters := map[string]bool{}
	err := f.everyLiveNode(func(ctx context.Context, node *goredis.Client) error {
		slot, err := node.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			return err
		}
		shards, err := node.ClusterShards(ctx).Result()
		if err != nil {
			return err
		}
		for _, shard := range shards {
			if !slices.ContainsFunc(shard.Slots, func(r goredis.SlotRange) bool { return r.Start <= slot && slot <= r.End }) {
				continue
			}
			for _, n := range shard.Nodes {
				if n.Role == "master" && n.Health == "online" {
					masters[fmt.Sprintf("%s:%d", n.IP, n.Port)] = true
					return nil
				}
			}
		}
		return fmt.Errorf("%s: no live master serves slot %d", node.Options().Addr, slot)
	})
	if err != nil {
		return "", err
	}
	if len(masters) != 1 {
		return "", fmt.Errorf("the live nodes disagree on the master of %s: %v", key, masters)
	}
	for master := range masters {
		return master, nil
	}
	return "", nil
}

// everyLiveNode runs check on a client of each node that runs, and returns the first error.
func (f *FailoverCluster) everyLiveNode(check func(context.Context, *goredis.Client) error) error {
	f.c.mu.Lock()
	addrs := make([]string, 0, len(f.c.nodes))
	for addr := range f.c.nodes {
		addrs = append(addrs, addr)
	}
	f.c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, addr := range addrs {
		node := goredis.NewClient(&goredis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
		err := check(ctx, node)
		_ = node.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// inSync reports whether a node's INFO replication shows it in sync: a replica's link up, or
// a master with replicas replicas all online.
func inSync(info string, replicas int) bool {
	if strings.Contains(info, "role:slave") {
		return strings.Contains(info, "master_link_status:up")
	}
	return strings.Contains(info, fmt.Sprintf("connected_slaves:%d\r\n", replicas)) && strings.Count(info, "state=online") == replicas
}

// PatternSubscriptions is how many patterns the live nodes hold subscribed (PUBSUB NUMPAT,
// summed): a client's pattern subscription counts once on the node it is open on.
func (f *FailoverCluster) PatternSubscriptions(t testing.TB) int {
	t.Helper()
	total := 0
	if err := f.everyLiveNode(func(ctx context.Context, node *goredis.Client) error {
		n, err := node.PubSubNumPat(ctx).Result()
		total += int(n)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return total
}

// CachedScripts is how many Lua scripts the node at addr holds in its script cache
// (number_of_cached_scripts in INFO memory).
func (f *FailoverCluster) CachedScripts(t testing.TB, addr string) int {
	t.Helper()
	node := goredis.NewClient(&goredis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	defer node.Close()
	info, err := node.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if n, ok := strings.CutPrefix(strings.TrimSpace(line), "number_of_cached_scripts:"); ok {
			var scripts int
			if _, err := fmt.Sscan(n, &scripts); err != nil {
				t.Fatal(err)
			}
			return scripts
		}
	}
	t.Fatalf("%s: no number_of_cached_scripts in INFO memory", addr)
	return 0
}

// AwaitReplicated waits until the replica of the master serving key's slot has every write that
// master took so far (WAIT), so a failover keeps them.
func (f *FailoverCluster) AwaitReplicated(t testing.TB, key string) {
	t.Helper()
	master := f.MasterOf(t, key)
	node := goredis.NewClient(&goredis.Options{Addr: master, DialTimeout: time.Second, ReadTimeout: promotionLimit, MaxRetries: -1})
	defer node.Close()
	acked, err := node.Do(context.Background(), "WAIT", 1, promotionLimit.Milliseconds()).Int()
	if err != nil || acked != 1 {
		t.Fatalf("WAIT on %s: %d replicas acknowledged (%v), want 1", master, acked, err)
	}
}
