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
		nodes, err := startRedisCluster(t.Logf)
		if err != nil {
			// Free ports are chosen, then released for the nodes to bind: another process on
			// the machine (another test run) can take one in between. A second start picks
			// others.
			t.Logf("start redis cluster, trying again on other ports: %v", err)
			nodes, err = startRedisCluster(t.Logf)
		}
		var missing *missingBinaryError
		switch {
		case errors.As(err, &missing):
			Unreachable(t, "redis cluster", err)
		case err != nil:
			t.Fatalf("start redis cluster: %v", err) // the nodes' logs are in the test's log
		}
		cluster.nodes = nodes
	}
	cluster.users++
	t.Cleanup(leaveRedisCluster)
	return cluster.nodes.url
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

// redisCluster is a running cluster: its URL, its redis-server processes and their directory.
type redisCluster struct {
	url   string
	dir   string
	nodes []*exec.Cmd
}

// stop kills the nodes, waits for them and removes their directory.
func (c *redisCluster) stop() {
	for _, node := range c.nodes {
		_ = node.Process.Kill()
		_ = node.Wait()
	}
	_ = os.RemoveAll(c.dir)
}

// startRedisCluster starts the nodes, joins them with redis-cli --cluster create and waits
// until every node reports cluster_state:ok. On an error nothing is left running, and the
// nodes' logs go to logf.
func startRedisCluster(logf func(format string, args ...any)) (c *redisCluster, err error) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, &missingBinaryError{err}
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, &missingBinaryError{err}
	}
	// Every node listens on two ports: clients' and the cluster bus.
	ports, err := FreePorts(2 * clusterMasters)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rushgate-redis-cluster-")
	if err != nil {
		return nil, err
	}
	c = &redisCluster{dir: dir}
	defer func() {
		if err != nil {
			logf("redis cluster nodes' logs:%s", c.logs())
			c.stop()
			c = nil
		}
	}()

	addrs := make([]string, clusterMasters)
	for i := range addrs {
		port, busPort := ports[2*i], ports[2*i+1]
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", port)
		node := exec.Command(server,
			"--port", fmt.Sprint(port), "--cluster-port", fmt.Sprint(busPort),
			"--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("nodes-%d.conf", port),
			"--save", "", "--appendonly", "no", "--bind", "127.0.0.1", "--daemonize", "no",
			"--logfile", fmt.Sprintf("node-%d.log", port))
		node.Dir = dir
		if err := node.Start(); err != nil {
			return c, fmt.Errorf("start redis-server on %s: %w", addrs[i], err)
		}
		c.nodes = append(c.nodes, node)
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
	create = append(create, "--cluster-replicas", "0", "--cluster-yes")
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
