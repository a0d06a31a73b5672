package e2e

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

// waitingLocker reports, once, that a request has reached the lock.
type waitingLocker struct {
	ports.Locker
	once    sync.Once
	waiting chan struct{}
}

func (l *waitingLocker) TryAcquire(ctx context.Context, key string, ttl time.Duration) (ports.Lock, error) {
	lock, err := l.Locker.TryAcquire(ctx, key, ttl)
	if err != nil {
		l.once.Do(func() { close(l.waiting) })
	}
	return lock, err
}

// startObservedServer starts a server on memory whose Locker tells when a request has reached
// a held lock.
func startObservedServer(t *testing.T) (*fxtest.App, *server, *waitingLocker) {
	var srv *bootstrap.Server
	observed := &waitingLocker{waiting: make(chan struct{})}
	cfg := testConfig(backend{name: "memory"})
	app := fxtest.New(t, modules(t, cfg),
		fx.Decorate(func(c ports.Coordination) ports.Coordination {
			observed.Locker, c.Locker = c.Locker, observed
			return c
		}),
		fx.Populate(&srv))
	app.RequireStart()
	return app, &server{t: t, url: srv.URL(), tokens: rghttp.NewTokens([]byte(jwtSecret)), http: newClient(cfg.Server.ReadHeaderTimeout)}, observed
}

// TestShutdown_FinishesInFlightRequests: a join waiting for its lock when the server is told
// to stop still completes, and then the server refuses new connections.
func TestShutdown_FinishesInFlightRequests(t *testing.T) {
	app, s, observed := startObservedServer(t)
	crewID := s.createCrew(3)

	// Another holder keeps the crew's lock, so the join below backs off while shutdown begins.
	held, err := observed.Locker.TryAcquire(context.Background(), "crew:"+crewID, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", s.url+"/crews/"+crewID+"/join", nil)
	req.Header.Set("Authorization", "Bearer "+s.token("late"))
	req.Header.Set("Idempotency-Key", "shutdown")
	answered := make(chan int, 1)
	go func() {
		res, err := s.http.Do(req)
		if err != nil {
			t.Errorf("in-flight request cut off: %v", err)
			answered <- 0
			return
		}
		res.Body.Close()
		answered <- res.StatusCode
	}()

	<-observed.waiting
	stopped := make(chan error, 1)
	go func() { stopped <- stopWithin(app, 30*time.Second) }()
	// Shutdown has begun once the listener refuses; it is then waiting for the join.
	testkit.Eventually(t, 30*time.Second, "the listener refuses connections", func() error {
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
		if err == nil {
			conn.Close()
			return errors.New("the listener still accepts")
		}
		return nil // refused: shutdown has begun
	})
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}

	if status := <-answered; status != http.StatusCreated {
		t.Fatalf("in-flight join answered %d", status)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	res, err := http.Get(s.url + "/healthz")
	if err == nil {
		res.Body.Close()
		t.Fatalf("server still answering after stop: %d", res.StatusCode)
	}
	if !strings.Contains(err.Error(), "refused") {
		t.Fatalf("server not refusing after stop: %v", err)
	}
}

// TestShutdown_ARequestStillRunningAtTheDeadlineAnswers503: a join waiting for a lock that is
// never released when the server is told to stop within 2 s is cancelled shortly before the
// stop's deadline, and answers 503 UNAVAILABLE with Retry-After instead of losing its
// connection when the process exits.
func TestShutdown_ARequestStillRunningAtTheDeadlineAnswers503(t *testing.T) {
	app, s, observed := startObservedServer(t)
	crewID := s.createCrew(3)
	// testenv's lock budget is far longer than the stop's 2 s: the join is still waiting.
	if _, err := observed.Locker.TryAcquire(context.Background(), "crew:"+crewID, time.Minute); err != nil {
		t.Fatal(err)
	}
	answered := make(chan answer, 1)
	go func() { answered <- s.joinFromAnyGoroutine(crewID, "late", "cut-short") }()
	<-observed.waiting

	const stopTime = 2 * time.Second
	began := time.Now()
	if err := stopWithin(app, stopTime); err != nil {
		t.Fatalf("stop: %v", err)
	}
	stopped := time.Since(began)
	a := <-answered
	if a.err != nil || a.status != http.StatusServiceUnavailable || a.code != "UNAVAILABLE" || a.retryAfter == "" {
		t.Fatalf("the join cut short answered %d %q (Retry-After %q, %v), want 503 UNAVAILABLE with Retry-After", a.status, a.code, a.retryAfter, a.err)
	}
	if stopped > stopTime {
		t.Fatalf("the stop took %v of its %v", stopped, stopTime)
	}
}
