package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/test/testkit"
)

// clusterMasters is the number of masters of the cluster RedisCluster starts.
const clusterMasters = 3

// Bounds on the cluster's start; a healthy one takes about a second, most of it
// redis-cli's wait for the nodes to agree, and a loaded machine several.
const (
	nodeStartLimit   = 20 * time.Second
	clusterJoinLimit = 60 * time.Second
	clusterOKLimit   = 30 * time.Second
)

// cluster is the Redis Cluster the tests of this process share while any of them runs.
var cluster struct {
	mu    sync.Mutex
	users int // tests between their RedisCluster call and their cleanup
	nodes *redisCluster
}

// RedisCluster returns the URL, in the form adapters/redis.NewClient takes
// ("redis://127.0.0.1:P1?addr=127.0.0.1:P2&addr=127.0.0.1:P3"), of a private Redis Cluster of
// three masters without replicas, started from this machine's redis-server and redis-cli on
// free ports. Tests that run at the same time share one cluster, and isolate themselves with
// random keys; the last of them to end stops it, and a later test starts a fresh one. A missing
// redis-server or redis-cli is Unreachable.
func RedisCluster(t testing.TB) string {
	t.Helper()
	cluster.mu.Lock()
	defer cluster.mu.Unlock()
	if cluster.users == 0 {
		cluster.nodes = startRedisClusterOrFail(t, 0)
	}
	cluster.users++
	t.Cleanup(leaveRedisCluster)
	return cluster.nodes.url
}

// startRedisClusterOrFail starts a cluster of clusterMasters masters with replicas replicas
// each, once more on other ports if the first start fails.
func startRedisClusterOrFail(t testing.TB, replicas int) *redisCluster {
	t.Helper()
	nodes, err := startRedisCluster(t.Logf, replicas)
	if err != nil {
		// Free ports are chosen, then released for the nodes to bind: another process on
		// the machine (another test run) can take one in between. A second start picks
		// others.
		t.Logf("start redis cluster, trying again on other ports: %v", err)
		nodes, err = startRedisCluster(t.Logf, replicas)
	}
	var missing *missingBinaryError
	switch {
	case errors.As(err, &missing):
		Unreachable(t, "redis cluster", err)
	case err != nil:
		t.Fatalf("start redis cluster: %v", err) // the nodes' logs are in the test's log
	}
	return nodes
}

// leaveRedisCluster stops the cluster once no test uses it.
func leaveRedisCluster() {
	cluster.mu.Lock()
	defer cluster.mu.Unlock()
	cluster.users--
	if cluster.users == 0 {
		cluster.nodes.stop()
		cluster.nodes = nil
	}
}

type missingBinaryError struct{ err error }

func (e *missingBinaryError) Error() string { return e.err.Error() }
func (e *missingBinaryError) Unwrap() error { return e.err }

// redisCluster is a running cluster: its URL, its redis-server processes by address and their
// directory.
type redisCluster struct {
	url    string
	dir    string
	server string // the redis-server binary
	mu     sync.Mutex
	nodes  map[string]*exec.Cmd // by host:port; a node killed and not restarted is absent
	ports  map[string][2]int    // each node's client and bus port
}

// stop kills the nodes, waits for them and removes their directory.
func (c *redisCluster) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, node := range c.nodes {
		_ = node.Process.Kill()
		_ = node.Wait()
	}
	c.nodes = map[string]*exec.Cmd{}
	_ = os.RemoveAll(c.dir)
}

// clusterNodeTimeout is cluster-node-timeout: how long a master must be unreachable before the
// others mark it failed and its replica is promoted, which then takes about as long again.
const clusterNodeTimeout = 1500 * time.Millisecond

// startNode starts the redis-server of addr, from its nodes-<port>.conf when it has one (a
// restart), so it rejoins the cluster with the identity it had.
func (c *redisCluster) startNode(addr string) error {
	ports := c.ports[addr]
	node := exec.Command(c.server,
		"--port", fmt.Sprint(ports[0]), "--cluster-port", fmt.Sprint(ports[1]),
		"--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("nodes-%d.conf", ports[0]),
		"--cluster-node-timeout", fmt.Sprint(clusterNodeTimeout.Milliseconds()),
		// A replica takes over however long its link was down: the test kills its master
		// under load, and a replica judged too stale would leave the slots down.
		"--cluster-replica-validity-factor", "0",
		"--save", "", "--appendonly", "no", "--bind", "127.0.0.1", "--daemonize", "no",
		"--logfile", fmt.Sprintf("node-%d.log", ports[0]))
	node.Dir = c.dir
	if err := node.Start(); err != nil {
		return fmt.Errorf("start redis-server on %s: %w", addr, err)
	}
	c.mu.Lock()
	c.nodes[addr] = node
	c.mu.Unlock()
	return nil
}

// startRedisCluster starts the nodes, joins them with redis-cli --cluster create and waits
// until every node reports cluster_state:ok. On an error nothing is left running, and the
// nodes' logs go to logf.
func startRedisCluster(logf func(format string, args ...any), replicas int) (c *redisCluster, err error) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, &missingBinaryError{err}
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, &missingBinaryError{err}
	}
	// Every node listens on two ports: clients' and the cluster bus.
	count := clusterMasters * (1 + replicas)
	ports, err := FreePorts(2 * count)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rushgate-redis-cluster-")
	if err != nil {
		return nil, err
	}
	c = &redisCluster{dir: dir, server: server, nodes: map[string]*exec.Cmd{}, ports: map[string][2]int{}}
	defer func() {
		if err != nil {
			logf("redis cluster nodes' logs:%s", c.logs())
			c.stop()
			c = nil
		}
	}()

	addrs := make([]string, count)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", ports[2*i])
		c.ports[addrs[i]] = [2]int{ports[2*i], ports[2*i+1]}
		if err := c.startNode(addrs[i]); err != nil {
			return c, err
		}
	}
	clients := make([]*goredis.Client, len(addrs))
	for i, addr := range addrs {
		clients[i] = goredis.NewClient(&goredis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
		defer clients[i].Close()
	}
	if err := pollAll(clients, nodeStartLimit, "answer PING", func(ctx context.Context, node *goredis.Client) bool {
		return node.Ping(ctx).Err() == nil
	}); err != nil {
		return c, err
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterJoinLimit)
	defer cancel()
	create := append([]string{"--cluster", "create"}, addrs...)
	create = append(create, "--cluster-replicas", fmt.Sprint(replicas), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, create...).CombinedOutput(); err != nil {
		logf("redis-cli --cluster create:\n%s", out)
		return c, fmt.Errorf("redis-cli --cluster create: %w", err)
	}
	if err := pollAll(clients, clusterOKLimit, "report cluster_state:ok", func(ctx context.Context, node *goredis.Client) bool {
		info, err := node.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	}); err != nil {
		return c, err
	}
	if replicas > 0 {
		// A replica that has not synced yet cannot take over: wait for every link.
		if err := pollAll(clients, clusterOKLimit, "report its replicas in sync", func(ctx context.Context, node *goredis.Client) bool {
			info, err := node.Info(ctx, "replication").Result()
			return err == nil && inSync(info, replicas)
		}); err != nil {
			return c, err
		}
	}

	c.url = "redis://" + addrs[0] + "?addr=" + strings.Join(addrs[1:], "&addr=")
	return c, nil
}

// pollAll polls until ready holds for every node, giving up after limit.
func pollAll(nodes []*goredis.Client, limit time.Duration, what string, ready func(context.Context, *goredis.Client) bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	return testkit.Poll(limit, func() error {
		for _, node := range nodes {
			if !ready(ctx, node) {
				return fmt.Errorf("redis node %s did not %s within %v", node.Options().Addr, what, limit)
			}
		}
		return nil
	})
}

// FreePorts returns n distinct ports free on 127.0.0.1 at the time of the call, for servers a
// test starts of its own.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close() // held until all are chosen, so none is chosen twice
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// logs returns the nodes' log files, to explain a failed start.
func (c *redisCluster) logs() string {
	paths, _ := filepath.Glob(filepath.Join(c.dir, "node-*.log"))
	var b strings.Builder
	for _, path := range paths {
		content, err := os.ReadFile(path)
		if err == nil {
			fmt.Fprintf(&b, "\n--- %s:\n%s", filepath.Base(path), content)
		}
	}
	return b.String()
}
