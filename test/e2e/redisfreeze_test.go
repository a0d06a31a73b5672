package e2e

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// TestRedisFrozen_AnswersUnavailableFast freezes Redis (SIGSTOP: connections stay open, nothing
// answers) while joins that passed the idempotency step wait for locks another instance holds.
// Each answers 503 UNAVAILABLE within the Redis timeout + 0.5 s, never a 429 after seconds of
// backoff; a join arriving while Redis is frozen does too. Once Redis resumes, the same keys
// join again.
//
// Their records cannot be deleted while Redis is frozen; the guard retries the deletion in the
// background, so the keys are free soon after Redis resumes, long before their lease ends. So is
// the key of the join that arrived while Redis was frozen, whose record Redis wrote on resuming.
func TestRedisFrozen_AnswersUnavailableFast(t *testing.T) {
	const (
		lease = 30 * time.Second
		joins = 4
	)
	// The Redis timeout and the lock TTL (half of which bounds one lock attempt) are the defaults.
	redisTimeout := bootstrap.DefaultConfig().Redis.Timeout
	redis := testenv.StartPrivateRedis(t)
	s := startServer(t, backend{name: "memory+redis", redisURL: redis.URL}, productionTimeouts, func(c *bootstrap.Config) {
		c.Guard.IdempotencyLease = lease
		// Short backoff steps, so Redis freezes between two quick lock attempts.
		c.Guard.LockBaseDelay = 20 * time.Millisecond
	})
	opts, err := goredis.ParseURL(redis.URL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()

	// A healthy join first measures the server's own time to answer one on this machine.
	healthy := s.joinFromAnyGoroutine(s.createCrew(5), "healthy", "k")
	if healthy.err != nil || healthy.status != http.StatusCreated {
		t.Fatalf("join while Redis is up: %v", healthy)
	}

	// Each join gets a crew of its own whose lock the test holds, so it waits for that lock.
	crews := make([]string, joins)
	for i := range crews {
		crews[i] = s.createCrew(5)
		if err := rdb.Set(ctx, "rushgate:lock:{crew:"+crews[i]+"}", "held-by-the-test", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	answers := make(chan answer, joins+1)
	for i, crewID := range crews {
		go func() { answers <- s.joinFromAnyGoroutine(crewID, fmt.Sprintf("frozen-%d", i), "k") }()
	}
	testkit.Eventually(t, 5*time.Second, "every join holds its idempotency record and waits for release notices", func() error {
		records, err := rdb.Keys(ctx, "rushgate:idem:*:frozen-*").Result()
		subscribed, perr := rdb.PubSubNumPat(ctx).Result()
		if err != nil || perr != nil || len(records) != joins || subscribed == 0 {
			return fmt.Errorf("%d of %d records (%w), %d pattern subscriptions (%w)", len(records), joins, err, subscribed, perr)
		}
		return nil
	})

	if err := signalProcess(redis.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := redis.Process.Signal(syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume)
	go func() { answers <- s.joinFromAnyGoroutine(crews[0], "arrived-frozen", "late") }()

	// Waiting for the lock: one lock attempt, half the TTL; the record's deletion goes on in the
	// background. Arriving while frozen: the idempotency step's timeout. Both within the stall
	// bound.
	bound := stallBound(redisTimeout, healthy.at.Sub(healthy.sent))
	for range joins + 1 {
		a := <-answers
		took := a.at.Sub(later(a.sent, frozen))
		t.Logf("%v, %v after Redis froze", a, took.Round(time.Millisecond))
		if a.err != nil || a.status != http.StatusServiceUnavailable || a.code != "UNAVAILABLE" || a.retryAfter == "" {
			t.Errorf("want 503 UNAVAILABLE with Retry-After, got %v", a)
		}
		if took > bound {
			t.Errorf("answered %v after Redis froze, want within %v", took, bound)
		}
	}

	resume()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for _, crewID := range crews {
		if err := rdb.Del(ctx, "rushgate:lock:{crew:"+crewID+"}").Err(); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 5*time.Second, "the records of the refused joins are deleted once Redis resumes", func() error {
		records, err := rdb.Keys(ctx, "rushgate:idem:*:frozen-*").Result()
		if err != nil || len(records) != 0 {
			return fmt.Errorf("records %v, %w", records, err)
		}
		return nil
	})
	for i, crewID := range crews {
		if res := s.join(crewID, fmt.Sprintf("frozen-%d", i), "k"); res.status != http.StatusCreated {
			t.Errorf("the same key once Redis resumed, within the lease: %d %s", res.status, res.raw)
		}
	}
	// The join that arrived while Redis was frozen sent its key's begin to the frozen Redis,
	// which ran it on resuming: the record it left, owned by no request, is taken back, so the
	// retry of that join is served, not refused as in progress for the whole lease.
	testkit.Eventually(t, 5*time.Second, "the join refused while Redis was frozen is served with its key once it resumed", func() error {
		if res := s.join(crews[0], "arrived-frozen", "late"); res.status != http.StatusCreated {
			return fmt.Errorf("%d %s", res.status, res.raw)
		}
		return nil
	})
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
