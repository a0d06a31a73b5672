package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	// nothing on disk, so it comes back empty; one of StartPersistentRedis reloads its
	// append-only file.
	Restart func()
	// dir holds the append-only file of a persistent one; "" otherwise.
	dir string
}

// StartPersistentRedis starts a private redis-server as StartPrivateRedis does, but logging
// every write to an append-only file in a directory of its own, fsynced before the write is
// answered (appendfsync always) and never rewritten, so Restart (a SIGKILL, then a start from
// the same directory) brings back every write it acknowledged.
func StartPersistentRedis(t testing.TB) *PrivateRedis {
	t.Helper()
	return startPrivateRedis(t, t.TempDir())
}

// LogLength is how long the append-only file of a persistent one is now: the point
// RestartFromLog can bring it back to.
func (r *PrivateRedis) LogLength(t testing.TB) int64 {
	t.Helper()
	info, err := os.Stat(r.incrementalLog(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// LogPath is the append-only file of a persistent one, to read the writes it logged.
func (r *PrivateRedis) LogPath(t testing.TB) string {
	t.Helper()
	return r.incrementalLog(t)
}

// RestartFromLog kills a persistent one, cuts its append-only file back to length (a
// LogLength read earlier) and starts it again from it: every write after that point is lost,
// as a Redis that fsyncs once a second (appendfsync everysec) loses the last second's when it
// dies. A write cut in half at that point is dropped on loading (aof-load-truncated).
func (r *PrivateRedis) RestartFromLog(t testing.TB, length int64) {
	t.Helper()
	r.Stop()
	if err := os.Truncate(r.incrementalLog(t), length); err != nil {
		t.Fatal(err)
	}
	r.Restart()
}

// incrementalLog is the one file a persistent redis-server appends its writes to: the
// multi-part append-only file's incremental part (Redis 7).
func (r *PrivateRedis) incrementalLog(t testing.TB) string {
	t.Helper()
	if r.dir == "" {
		t.Fatal("this private redis-server keeps nothing on disk")
	}
	logs, err := filepath.Glob(filepath.Join(r.dir, "appendonlydir", "*.incr.aof"))
	if err != nil || len(logs) != 1 {
		t.Fatalf("the append-only file's incremental parts in %s: %v %v, want one", r.dir, logs, err)
	}
	return logs[0]
}

// StartPrivateRedis starts a redis-server on a free port, with nothing saved to disk, and waits
// until it, not whatever else took the port meanwhile, answers. A missing redis-server is
// Unreachable.
func StartPrivateRedis(t testing.TB) *PrivateRedis {
	t.Helper()
	return startPrivateRedis(t, "")
}

// startPrivateRedis starts one keeping its append-only file in dir, or nothing on disk when
// dir is "".
func startPrivateRedis(t testing.TB, dir string) *PrivateRedis {
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
	r := &PrivateRedis{Addr: addr, URL: "redis://" + addr + "/0", dir: dir}
	args := []string{"--port", fmt.Sprint(ports[0]), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}
	if dir != "" {
		args = []string{"--port", fmt.Sprint(ports[0]), "--bind", "127.0.0.1", "--save", "", "--dir", dir,
			"--appendonly", "yes", "--appendfsync", "always", "--auto-aof-rewrite-percentage", "0"}
	}
	start := func() {
		cmd := exec.Command(bin, args...)
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
