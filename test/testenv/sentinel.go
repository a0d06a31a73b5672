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
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/test/testkit"
)

// SentinelMasterName is the name the sentinels of RedisSentinels monitor their master by.
const SentinelMasterName = "rushgate"

// Timings of the sentinels RedisSentinels starts: a master unanswered for a second is down for
// one sentinel, and for all once two agree; a failover that has not finished within its timeout
// is abandoned and tried again.
const (
	sentinelDownAfter       = time.Second
	sentinelFailoverTimeout = 5 * time.Second
	sentinelQuorum          = 2
	sentinelCount           = 3
)

// Bounds on what RedisSentinels waits for. A healthy deployment is ready within a few seconds
// (the sentinels find the replica and each other through the master's INFO and Pub/Sub, every
// 2 to 10 s); a failover takes 2 to 4 s after the kill here. A restarted master is turned into a
// replica only after the sentinels have heard it claim to be a master for 8 s.
const (
	sentinelReadyLimit    = 45 * time.Second
	sentinelFailoverLimit = 30 * time.Second
	sentinelRejoinLimit   = 45 * time.Second
)

// RedisSentinels is a private Redis master with one replica, monitored by three sentinels, all
// redis-server processes of one test on free ports, keeping nothing on disk but the sentinels'
// configuration (which Sentinel rewrites).
type RedisSentinels struct {
	// URL names the sentinels and the master's name, in the form adapters/redis.NewClient takes:
	// redis://s1/0?master_name=…&addr=s2&addr=s3.
	URL string
	// Sentinels are the sentinels' host:port.
	Sentinels []string

	t    testing.TB
	bin  string
	dir  string
	data map[string]*redisProcess // the master and the replica, by host:port
	// sentinels are the sentinels' processes, by host:port; frozen those FreezeSentinel stopped.
	sentinels map[string]*redisProcess
	frozen    map[string]bool
}

// redisProcess is one redis-server of RedisSentinels: a data node or a sentinel.
type redisProcess struct {
	addr string
	args []string
	cmd  *exec.Cmd
}

// StartRedisSentinels starts a master, its replica (replicaof the master) and three sentinels
// monitoring the master with a quorum of two, and waits until the replica is in sync and every
// sentinel knows the replica and the other two sentinels, so that a failover can happen. A
// missing redis-server is Unreachable. Everything is killed at cleanup.
func StartRedisSentinels(t testing.TB) *RedisSentinels {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Unreachable(t, "redis-server binary", err)
	}
	ports, err := FreePorts(2 + sentinelCount)
	if err != nil {
		t.Fatal(err)
	}
	s := &RedisSentinels{t: t, bin: bin, dir: t.TempDir(), data: map[string]*redisProcess{},
		sentinels: map[string]*redisProcess{}, frozen: map[string]bool{}}
	master, replica := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	for _, addr := range []string{master, replica} {
		_, port, _ := net.SplitHostPort(addr)
		// A replica stores the snapshot of a full sync in its directory: the test's own, not the
		// package's the test runs in.
		dir := filepath.Join(s.dir, "node-"+port)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		// Diskless replication with no delay: a replica (the first one, or a restarted master)
		// is in sync within milliseconds rather than Redis 7's 5 s wait for more replicas.
		args := []string{"--port", port, "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no",
			"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}
		if addr == replica {
			args = append(args, "--replicaof", "127.0.0.1", fmt.Sprint(ports[0]))
		}
		s.data[addr] = &redisProcess{addr: addr, args: args}
	}
	t.Cleanup(s.stopAll)
	s.start(s.data[master])
	s.start(s.data[replica])
	for _, port := range ports[2:] {
		conf := filepath.Join(s.dir, fmt.Sprintf("sentinel-%d.conf", port))
		content := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\n", port, s.dir) +
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d\n", SentinelMasterName, ports[0], sentinelQuorum) +
			fmt.Sprintf("sentinel down-after-milliseconds %s %d\n", SentinelMasterName, sentinelDownAfter.Milliseconds()) +
			fmt.Sprintf("sentinel failover-timeout %s %d\n", SentinelMasterName, sentinelFailoverTimeout.Milliseconds())
		if err := os.WriteFile(conf, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		sentinel := &redisProcess{addr: fmt.Sprintf("127.0.0.1:%d", port), args: []string{conf, "--sentinel"}}
		t.Cleanup(func() { stopProcess(sentinel) })
		s.start(sentinel)
		s.Sentinels = append(s.Sentinels, sentinel.addr)
		s.sentinels[sentinel.addr] = sentinel
	}
	s.URL = fmt.Sprintf("redis://%s/0?master_name=%s&addr=%s", s.Sentinels[0], SentinelMasterName,
		strings.Join(s.Sentinels[1:], "&addr="))
	s.awaitReady(master, replica, sentinelReadyLimit, "the sentinels know the master, its replica and each other")
	return s
}

// start starts p and waits until its port answers INFO from p's own process, not from whatever
// else took the port since it was chosen.
func (s *RedisSentinels) start(p *redisProcess) {
	s.t.Helper()
	cmd := exec.Command(s.bin, p.args...)
	cmd.Stdout = LogWriter(s.t)
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	p.cmd = cmd
	client := goredis.NewClient(&goredis.Options{Addr: p.addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	defer client.Close()
	testkit.Eventually(s.t, nodeStartLimit, "redis-server "+strings.Join(p.args, " ")+" answers on "+p.addr, func() error {
		info, err := client.Info(context.Background(), "server").Result()
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("process_id:%d\r\n", cmd.Process.Pid); !strings.Contains(info, want) {
			return fmt.Errorf("%s is not this test's redis-server (pid %d)", p.addr, cmd.Process.Pid)
		}
		return nil
	})
}

// stopProcess kills p, if running, and waits for it.
func stopProcess(p *redisProcess) {
	if p.cmd != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		p.cmd = nil
	}
}

func (s *RedisSentinels) stopAll() {
	for _, p := range s.data {
		stopProcess(p)
	}
}

// MasterAddr is the master's host:port as every sentinel reports it (SENTINEL
// get-master-addr-by-name); it fails the test when they disagree or one does not answer.
func (s *RedisSentinels) MasterAddr(t testing.TB) string {
	t.Helper()
	addr, err := s.agreedMaster()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// agreedMaster is the master every sentinel but the frozen ones reports, or an error naming the
// disagreement.
func (s *RedisSentinels) agreedMaster() (string, error) {
	var agreed string
	for _, sentinel := range s.Sentinels {
		if s.frozen[sentinel] {
			continue
		}
		c := goredis.NewSentinelClient(&goredis.Options{Addr: sentinel, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
		addr, err := c.GetMasterAddrByName(context.Background(), SentinelMasterName).Result()
		_ = c.Close()
		if err != nil {
			return "", fmt.Errorf("sentinel %s: get-master-addr-by-name: %w", sentinel, err)
		}
		master := net.JoinHostPort(addr[0], addr[1])
		if agreed != "" && master != agreed {
			return "", fmt.Errorf("sentinels disagree on the master: %s, %s", agreed, master)
		}
		agreed = master
	}
	return agreed, nil
}

// KillMaster kills the master with SIGKILL, as a machine that dies takes it: the replica keeps
// what it received, an asynchronous replica maybe not the last writes. It returns the killed
// master's address.
func (s *RedisSentinels) KillMaster(t testing.TB) string {
	t.Helper()
	master := s.MasterAddr(t)
	p := s.data[master]
	if p == nil || p.cmd == nil {
		t.Fatalf("the sentinels' master %s is not a running node of this test", master)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	p.cmd = nil
	return master
}

// KillMasterLosingWrites kills the master as KillMaster does, after writes has run on it
// without its replica receiving them: the replica is frozen (SIGSTOP) and its link dropped by
// the master (CLIENT KILL TYPE replica), writes runs, the master is killed, and the replica
// resumes, having lost what an asynchronous replica loses when its master dies before sending
// it the last writes. writes must be quick: frozen for longer than a second, the replica is down
// for the sentinels, which then wait for it before a failover. It returns the killed master's
// address.
func (s *RedisSentinels) KillMasterLosingWrites(t testing.TB, writes func()) string {
	t.Helper()
	master := s.MasterAddr(t)
	var replica *redisProcess
	for addr, p := range s.data {
		if addr != master && p.cmd != nil {
			replica = p
		}
	}
	if replica == nil {
		t.Fatalf("the master %s has no running replica", master)
	}
	if err := replica.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := replica.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	defer resume()
	if err := s.Client(t, master).ClientKillByFilter(context.Background(), "TYPE", "replica").Err(); err != nil {
		t.Fatalf("drop the replica's link: %v", err)
	}
	writes()
	killed := s.KillMaster(t)
	resume()
	return killed
}

// Switchover asks a sentinel for a failover while the master runs (SENTINEL FAILOVER), as an
// operator does before maintenance, and returns the master's address: the sentinels promote
// the replica, then turn the old master, still running, into its replica. AwaitPromotion and
// AwaitReplica wait for each.
func (s *RedisSentinels) Switchover(t testing.TB) string {
	t.Helper()
	master := s.MasterAddr(t)
	c := goredis.NewSentinelClient(&goredis.Options{Addr: s.Sentinels[0], DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	defer c.Close()
	if err := c.Failover(context.Background(), SentinelMasterName).Err(); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	return master
}

// AwaitReplica waits until the node at addr, running, is a replica of the current master in
// sync and every sentinel lists it as one.
func (s *RedisSentinels) AwaitReplica(t testing.TB, addr string) {
	t.Helper()
	s.awaitReady(s.MasterAddr(t), addr, sentinelRejoinLimit, addr+" is a replica of the new master")
}

// AwaitPromotion waits until every sentinel reports a master other than old and that master
// accepts writes (role master: a SET answers), and returns its address.
func (s *RedisSentinels) AwaitPromotion(t testing.TB, old string) string {
	t.Helper()
	var promoted string
	testkit.Eventually(t, sentinelFailoverLimit, "the sentinels promote the replica of "+old, func() error {
		master, err := s.agreedMaster()
		if err != nil {
			return err
		}
		if master == old {
			return fmt.Errorf("the sentinels still report %s", old)
		}
		c := goredis.NewClient(&goredis.Options{Addr: master, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
		defer c.Close()
		if err := c.Set(context.Background(), "rushgate-test:sentinel-promoted", "1", time.Minute).Err(); err != nil {
			return fmt.Errorf("the promoted %s refuses a write: %w", master, err)
		}
		promoted = master
		return nil
	})
	return promoted
}

// RestartNode starts the killed node at addr again on its port, empty, as a master restarted
// without persistence: the sentinels turn it into a replica of the current master. It waits
// until it is one, in sync, and every sentinel lists it as a replica again.
func (s *RedisSentinels) RestartNode(t testing.TB, addr string) {
	t.Helper()
	p := s.data[addr]
	if p == nil || p.cmd != nil {
		t.Fatalf("%s is not a stopped node of this test", addr)
	}
	// It starts as it first did; a former replica must not come back following a dead master.
	p.args = withoutFlag(p.args, "--replicaof")
	s.start(p)
	s.awaitReady(s.MasterAddr(t), addr, sentinelRejoinLimit, "the restarted "+addr+" rejoins as a replica")
}

// withoutFlag returns args without flag and the two arguments after it.
func withoutFlag(args []string, flag string) []string {
	for i, a := range args {
		if a == flag {
			return append(append([]string{}, args[:i]...), args[i+3:]...)
		}
	}
	return args
}

// awaitReady waits until replica is a replica of master with its link up, and every sentinel
// reports master, lists replica as a replica in good standing and knows the other sentinels.
func (s *RedisSentinels) awaitReady(master, replica string, limit time.Duration, what string) {
	s.t.Helper()
	node := goredis.NewClient(&goredis.Options{Addr: replica, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	defer node.Close()
	ctx := context.Background()
	testkit.Eventually(s.t, limit, what, func() error {
		info, err := node.Info(ctx, "replication").Result()
		if err != nil {
			return fmt.Errorf("replica %s: %w", replica, err)
		}
		_, masterPort, _ := net.SplitHostPort(master)
		if !strings.Contains(info, "role:slave\r\n") || !strings.Contains(info, "master_port:"+masterPort+"\r\n") ||
			!strings.Contains(info, "master_link_status:up\r\n") {
			return fmt.Errorf("%s is not a replica of %s in sync: %q", replica, master, info)
		}
		if agreed, err := s.agreedMaster(); err != nil || agreed != master {
			return fmt.Errorf("the sentinels' master: %s, %w; want %s", agreed, err, master)
		}
		for _, sentinel := range s.Sentinels {
			if s.frozen[sentinel] {
				continue
			}
			if err := s.sentinelKnows(ctx, sentinel, replica); err != nil {
				return err
			}
		}
		return nil
	})
}

// sentinelKnows checks that sentinel lists replica as a replica that is up, and the other
// sentinels.
func (s *RedisSentinels) sentinelKnows(ctx context.Context, sentinel, replica string) error {
	c := goredis.NewSentinelClient(&goredis.Options{Addr: sentinel, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	defer c.Close()
	replicas, err := c.Replicas(ctx, SentinelMasterName).Result()
	if err != nil {
		return fmt.Errorf("sentinel %s: replicas: %w", sentinel, err)
	}
	listed := false
	for _, r := range replicas {
		if net.JoinHostPort(r["ip"], r["port"]) == replica {
			if flags := r["flags"]; flags != "slave" {
				return fmt.Errorf("sentinel %s: replica %s has flags %q", sentinel, replica, flags)
			}
			listed = true
		}
	}
	if !listed {
		return fmt.Errorf("sentinel %s does not list %s as a replica yet", sentinel, replica)
	}
	others, err := c.Sentinels(ctx, SentinelMasterName).Result()
	if err != nil {
		return fmt.Errorf("sentinel %s: sentinels: %w", sentinel, err)
	}
	if len(others) != sentinelCount-1 {
		return fmt.Errorf("sentinel %s knows %d other sentinels, want %d", sentinel, len(others), sentinelCount-1)
	}
	return nil
}

// Client is a client of the node at addr, closed at the test's end: to read or write what a
// master or replica holds.
func (s *RedisSentinels) Client(t testing.TB, addr string) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Running reports whether the node at addr runs (was not killed, or was restarted since).
func (s *RedisSentinels) Running(addr string) bool {
	p := s.data[addr]
	return p != nil && p.cmd != nil
}

// SubscribedSentinel waits until a client (a go-redis failover client, as rushgate's) listens
// to one sentinel for failovers (+switch-master), the sentinel it asks for the master's address,
// and returns that sentinel's address.
func (s *RedisSentinels) SubscribedSentinel(t testing.TB) string {
	t.Helper()
	var subscribed string
	testkit.Eventually(t, 10*time.Second, "a client subscribed to a sentinel's +switch-master", func() error {
		for _, sentinel := range s.Sentinels {
			c := goredis.NewClient(&goredis.Options{Addr: sentinel, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
			clients, err := c.ClientList(context.Background()).Result()
			_ = c.Close()
			if err != nil {
				return fmt.Errorf("sentinel %s: client list: %w", sentinel, err)
			}
			// Sentinels talk to each other on plain links; only a client subscribes.
			for _, line := range strings.Split(clients, "\n") {
				if strings.Contains(line, " sub=") && !strings.Contains(line, " sub=0 ") {
					subscribed = sentinel
					return nil
				}
			}
		}
		return errors.New("no sentinel has a subscribed client")
	})
	return subscribed
}

// FreezeSentinel stops the sentinel at addr (SIGSTOP: its connections stay open, nothing
// answers), as a sentinel whose host is cut off, until the returned resume is called or the
// test ends. The other sentinels still hold a majority, and fail the master over.
func (s *RedisSentinels) FreezeSentinel(t testing.TB, addr string) (resume func()) {
	t.Helper()
	p := s.sentinels[addr]
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	s.frozen[addr] = true
	resume = func() {
		if s.frozen[addr] {
			delete(s.frozen, addr)
			if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume)
	return resume
}

// Nodes are the master's and the replica's host:port, whatever their roles now.
func (s *RedisSentinels) Nodes() []string {
	nodes := make([]string, 0, len(s.data))
	for addr := range s.data {
		nodes = append(nodes, addr)
	}
	return nodes
}
