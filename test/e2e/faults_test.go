package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/fx/fxtest"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// redisProcess is a private redis-server: its URL, its process (to signal it), a stop that
// kills it, also run at cleanup, and a restart that starts a new one, empty, on the same port.
type redisProcess struct {
	url     string
	process *os.Process
	stop    func()
	restart func()
}

// startPrivateRedis starts a redis-server of the test's own on a free port and waits until it,
// not whatever else took the port meanwhile, answers. Like the machine's, it keeps nothing on
// disk: a restart comes back empty.
func startPrivateRedis(t *testing.T) *redisProcess {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Unreachable(t, "redis-server binary", err)
	}
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	r := &redisProcess{url: "redis://" + addr + "/0"}
	var stopped bool
	start := func() {
		cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		cmd.Stdout = testenv.LogWriter(t)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stopped = false
		r.process = cmd.Process
		r.stop = func() {
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
	t.Cleanup(func() { r.stop() })
	r.restart = func() {
		r.stop()
		start()
	}
	return r
}

// TestFaults_RedisStoppedMidTestAnswers503Fast: joins answer 503 UNAVAILABLE within about a
// second once Redis dies, and nothing half-done reaches the database.
func TestFaults_RedisStoppedMidTestAnswers503Fast(t *testing.T) {
	for _, db := range testenv.Databases(t) {
		t.Run(string(db.Dialect), func(t *testing.T) {
			redis := startPrivateRedis(t)
			s := startServer(t, backend{name: string(db.Dialect), databaseURL: db.URL, redisURL: redis.url}, productionTimeouts)
			crewID := s.createCrew(10)
			sent := time.Now()
			if res := s.join(crewID, "before", "k"); res.status != http.StatusCreated {
				t.Fatalf("join while Redis is up: %d %s", res.status, res.raw)
			}
			bound := stallBound(bootstrap.DefaultConfig().Redis.Timeout, time.Since(sent))

			redis.stop()
			for i := range 5 {
				started := time.Now()
				res := s.join(crewID, fmt.Sprintf("after-%d", i), "k")
				took := time.Since(started)
				assertError(t, res, http.StatusServiceUnavailable, "UNAVAILABLE")
				if res.header.Get("Retry-After") == "" {
					t.Fatal("503 without Retry-After")
				}
				if took > bound {
					t.Fatalf("503 took %v, want within the Redis timeout + 0.5 s (+ the healthy join's time), %v", took, bound)
				}
			}
			ready := s.do("GET", "/readyz", "", "")
			if ready.status != http.StatusServiceUnavailable || !strings.Contains(string(ready.raw), "redis") {
				t.Fatalf("readyz with Redis down: %d %s", ready.status, ready.raw)
			}
			if st := s.stored(crewID); st.currentMembers != 1 || st.members != 1 {
				t.Fatalf("stored %+v", st)
			}
		})
	}
}

// TestFaults_DatabaseUnreachableAtStart: the start fails with one clear error naming the variable
// and the database.
func TestFaults_DatabaseUnreachableAtStart(t *testing.T) {
	for _, url := range []string{
		"postgres://postgres@127.0.0.1:1/test?sslmode=disable",
		"mysql://root@127.0.0.1:1/test",
	} {
		t.Run(strings.SplitN(url, ":", 2)[0], func(t *testing.T) {
			cfg := testConfig(backend{databaseURL: url})
			productionTimeouts(&cfg)
			started := time.Now()
			app := fx.New(modules(t, cfg), fx.WithLogger(func() fxevent.Logger { return fxtest.NewTestLogger(t) }))
			err := bootstrap.RootCause(app.Err())
			if err == nil {
				_ = stopWithin(app, 30*time.Second)
				t.Fatal("start succeeded without a database")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "RUSHGATE_DATABASE_URL: ") || !strings.Contains(msg, "127.0.0.1:1") || strings.Contains(msg, "\n") {
				t.Fatalf("unclear start error: %q", msg)
			}
			if time.Since(started) > 10*time.Second {
				t.Fatalf("start took %v to fail", time.Since(started))
			}
		})
	}
}
