package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/fx/fxtest"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
)

// TestFaults_RedisStoppedMidTestAnswers503Fast: joins answer 503 UNAVAILABLE within about a
// second once Redis dies, and nothing half-done reaches the database.
func TestFaults_RedisStoppedMidTestAnswers503Fast(t *testing.T) {
	for _, db := range testenv.Databases(t) {
		t.Run(string(db.Dialect), func(t *testing.T) {
			redis := testenv.StartPrivateRedis(t)
			s := startServer(t, backend{name: string(db.Dialect), databaseURL: db.URL, redisURL: redis.URL}, productionTimeouts)
			crewID := s.createCrew(10)
			sent := time.Now()
			if res := s.join(crewID, "before", "k"); res.status != http.StatusCreated {
				t.Fatalf("join while Redis is up: %d %s", res.status, res.raw)
			}
			bound := stallBound(bootstrap.DefaultConfig().Redis.Timeout, time.Since(sent))

			redis.Stop()
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
