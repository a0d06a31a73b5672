package redis_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
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

// TestMemoryPolicies_ReadsEachMastersPolicy: a single server's policy and maxmemory as set, and
// whether it evicts; every master of a Cluster.
func TestMemoryPolicies_ReadsEachMastersPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	redis := testenv.StartPrivateRedis(t)
	client := newTestClientOf(t, redis.URL)

	policies, err := rgredis.MemoryPolicies(ctx, client)
	require.NoError(t, err)
	require.Equal(t, []rgredis.MemoryPolicy{{Node: redis.Addr, Policy: "noeviction", MaxMemory: 0}}, policies)
	assert.False(t, policies[0].Evicts())

	require.NoError(t, client.ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err())
	require.NoError(t, client.ConfigSet(ctx, "maxmemory", "104857600").Err())
	policies, err = rgredis.MemoryPolicies(ctx, client)
	require.NoError(t, err)
	require.Equal(t, []rgredis.MemoryPolicy{{Node: redis.Addr, Policy: "volatile-lru", MaxMemory: 100 << 20}}, policies)
	assert.True(t, policies[0].Evicts())

	cluster := newTestClientOf(t, testenv.RedisCluster(t))
	policies, err = rgredis.MemoryPolicies(ctx, cluster)
	require.NoError(t, err)
	nodes := map[string]bool{}
	for _, p := range policies {
		nodes[p.Node] = true
		assert.Equal(t, "noeviction", p.Policy, p.Node)
	}
	assert.Len(t, nodes, 3, "one policy per master: %v", policies)
}

// TestMemoryPolicies_SentinelsMasterByItsAddress: behind Sentinel the one master is read and
// named by its host:port, not by the client's placeholder.
func TestMemoryPolicies_SentinelsMasterByItsAddress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	master := testenv.StartPrivateRedis(t)
	require.NoError(t, newTestClientOf(t, master.URL).ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err())
	client := newTestClientOf(t, "redis://"+startSentinel(t, master.Addr)+"?master_name=rushgate")

	policies, err := rgredis.MemoryPolicies(ctx, client)
	require.NoError(t, err)
	assert.Equal(t, []rgredis.MemoryPolicy{{Node: master.Addr, Policy: "allkeys-lru", MaxMemory: 0}}, policies)
}

// startSentinel starts a Redis Sentinel monitoring masterAddr as "rushgate", stopped when the
// test ends, and returns its address once it knows the master.
func startSentinel(t *testing.T, masterAddr string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Unreachable(t, "redis-server binary", err)
	}
	ports, err := testenv.FreePorts(1)
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(masterAddr)
	require.NoError(t, err)
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	require.NoError(t, os.WriteFile(conf, fmt.Appendf(nil, "port %d\nbind 127.0.0.1\nsentinel monitor rushgate %s %s 1\n",
		ports[0], host, port), 0o600))
	cmd := exec.Command(bin, conf, "--sentinel")
	cmd.Stdout = testenv.LogWriter(t)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	sentinel := goredis.NewSentinelClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = sentinel.Close() })
	testkit.Eventually(t, 5*time.Second, "the sentinel knows the master", func() error {
		return sentinel.GetMasterAddrByName(context.Background(), "rushgate").Err()
	})
	return addr
}

// TestMemoryPolicies_ConfigDeniedIsUnavailableNamingTheNode: a user whose ACL denies CONFIG (as
// a managed Redis does) gets an error naming the node, wrapping ports.ErrUnavailable.
func TestMemoryPolicies_ConfigDeniedIsUnavailableNamingTheNode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	redis := testenv.StartPrivateRedis(t)
	require.NoError(t, newTestClientOf(t, redis.URL).Do(ctx, "ACL", "SETUSER", "app", "on", ">app-password", "~*", "&*", "+@all", "-config").Err())
	app := newTestClientOf(t, "redis://app:app-password@"+redis.Addr+"/0")

	policies, err := rgredis.MemoryPolicies(ctx, app)
	require.Error(t, err)
	assert.Empty(t, policies)
	assert.ErrorIs(t, err, ports.ErrUnavailable)
	assert.Contains(t, err.Error(), redis.Addr)
	assert.Contains(t, err.Error(), "NOPERM")
}

// TestMemoryPolicies_FollowsTheSentinelsMasterThroughAFailover: the policy read behind
// Sentinel is the master's of the moment: once the sentinels have promoted the replica (the
// master killed), the same client reads the promoted node's policy, named by its address, not
// the dead master's.
func TestMemoryPolicies_FollowsTheSentinelsMasterThroughAFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sentinels := testenv.StartRedisSentinels(t)
	master := sentinels.MasterAddr(t)
	client := newTestClientOf(t, sentinels.URL)
	policies, err := rgredis.MemoryPolicies(ctx, client)
	require.NoError(t, err)
	require.Equal(t, []rgredis.MemoryPolicy{{Node: master, Policy: "noeviction", MaxMemory: 0}}, policies)

	var replica string
	for _, addr := range sentinels.Nodes() {
		if addr != master {
			replica = addr
		}
	}
	// A replica's configuration is its own: CONFIG SET is not replicated.
	require.NoError(t, sentinels.Client(t, replica).ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err())
	promoted := sentinels.AwaitPromotion(t, sentinels.KillMaster(t))
	require.Equal(t, replica, promoted)
	testkit.Eventually(t, 10*time.Second, "the promoted master's policy read", func() error {
		policies, err := rgredis.MemoryPolicies(ctx, client)
		if err != nil {
			return err
		}
		if want := []rgredis.MemoryPolicy{{Node: promoted, Policy: "allkeys-lru", MaxMemory: 0}}; !reflect.DeepEqual(policies, want) {
			return fmt.Errorf("read %+v, want %+v", policies, want)
		}
		return nil
	})
}
