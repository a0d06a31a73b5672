package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/test/testkit"
)

// PrivateRedis is a redis-server of one test's own: nothing else has run a command on it, so
// its script cache starts empty, and it can be signalled, stopped or restarted.
type PrivateRedis struct {
	// Addr is its host:port, URL its address as adapters/redis.NewClient takes it.
	Addr, URL string
	// Process is the running server's, to signal it (SIGSTOP freezes it).
	Process *os.Process
	// Stop kills it; it also runs at cleanup.
	Stop func()
	// Restart kills it and starts a new one on the same port: like the machine's, it keeps
	// nothing on disk, so it comes back empty.
	Restart func()
}

// StartPrivateRedis starts a redis-server on a free port, with nothing saved to disk, and waits
// until it, not whatever else took the port meanwhile, answers. A missing redis-server is
// Unreachable.
func StartPrivateRedis(t testing.TB) *PrivateRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Unreachable(t, "redis-server binary", err)
	}
	ports, err := FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	r := &PrivateRedis{Addr: addr, URL: "redis://" + addr + "/0"}
	start := func() {
		cmd := exec.Command(bin, "--port", fmt.Sprint(ports[0]), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		cmd.Stdout = LogWriter(t)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stopped := false
		r.Process = cmd.Process
		r.Stop = func() {
			if !stopped {
				stopped = true
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		}
		// Whatever listens on the port answers a dial: another process may have taken it since
		// it was chosen, and then this redis-server, unable to bind, exits. Only this process
		// counts.
		client := goredis.NewClient(&goredis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
		defer client.Close()
		testkit.Eventually(t, 5*time.Second, "the private redis-server accepts connections", func() error {
			info, err := client.Info(context.Background(), "server").Result()
			if err != nil {
				return err
			}
			if want := fmt.Sprintf("process_id:%d\r\n", cmd.Process.Pid); !strings.Contains(info, want) {
				return fmt.Errorf("%s is not this test's redis-server (pid %d)", addr, cmd.Process.Pid)
			}
			return nil
		})
	}
	start()
	t.Cleanup(func() { r.Stop() })
	r.Restart = func() {
		r.Stop()
		start()
	}
	return r
}
