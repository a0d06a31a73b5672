package redis_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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

// slowRedis starts a Redis of the test's own, so that no script is in its cache yet, behind a
// link whose every round trip costs roundTrip, and returns a client of it with timeout as every
// timeout, warmed up as the server does at start, and the link.
func slowRedis(t *testing.T, roundTrip, timeout time.Duration, poolSize int) (goredis.UniversalClient, *testkit.SlowProxy) {
	t.Helper()
	link := testkit.StartSlowProxy(t, testenv.StartPrivateRedis(t).Addr)
	link.SetDelay(roundTrip)
	client, err := rgredis.NewClient("redis://"+link.Addr(), rgredis.Options{
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolSize: poolSize,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*timeout)
	defer cancel()
	require.NoError(t, rgredis.WarmUp(ctx, client))
	return client, link
}

// awaitPatternSubscribers waits until n clients of client's Redis are subscribed to a pattern:
// the release-notice subscriptions of n Lockers, opened in the background when they are made.
func awaitPatternSubscribers(t *testing.T, client goredis.UniversalClient, n int) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d Lockers subscribed to release notices", n), func() error {
		clients, err := client.ClientList(context.Background()).Result()
		if err != nil {
			return err
		}
		if got := strings.Count(clients, " psub=1 "); got != n {
			return fmt.Errorf("%d clients subscribed to a pattern, want %d", got, n)
		}
		return nil
	})
}

// sentCommands counts the commands a client sends, by name, handshakes included. A call that
// waits for each answer before its next command pays one round trip per command (a pipeline's
// commands count one each, so they bound its round trips), however long a loaded runner makes
// them: a starved test process or redis-server stretched a round trip of the slow proxy by
// hundreds of milliseconds, so that a call's duration miscounted its round trips.
type sentCommands struct {
	mu     sync.Mutex
	byName map[string]int64
	total  int64
}

// countCommands counts the commands c sends from now on.
func countCommands(c goredis.UniversalClient) *sentCommands {
	sent := &sentCommands{byName: map[string]int64{}}
	c.AddHook(commandCounter{count: sent.add})
	return sent
}

func (s *sentCommands) add(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byName[name]++
	s.total++
}

// named is how many commands called name were sent.
func (s *sentCommands) named(name string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byName[name]
}

// all is how many commands were sent.
func (s *sentCommands) all() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

type commandCounter struct{ count func(name string) }

func (commandCounter) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h commandCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.count(cmd.Name())
		return next(ctx, cmd)
	}
}

func (h commandCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		for _, cmd := range cmds {
			h.count(cmd.Name())
		}
		return next(ctx, cmds)
	}
}

// The first call of a script on a Redis that never ran it is one round trip, EVALSHA, on a
// connection already open: the scripts were loaded, and the pool opened, at start. Loaded on
// first use, it was three: the connection's handshake, then EVALSHA answered NOSCRIPT, then EVAL.
func TestWarmUp_TheFirstCallOfAScriptIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	const roundTrip = 400 * time.Millisecond
	client, _ := slowRedis(t, roundTrip, 2*time.Second, 4)
	sent := countCommands(client)
	store := rgredis.NewIdempotencyStore(client, "rg-test-idem:")

	started := time.Now()
	_, err := store.Begin(context.Background(), ports.IdempotencyKey{Scope: "user", Key: rand.Text()}, "fp", time.Minute, time.Minute)
	took := time.Since(started)

	require.NoError(t, err)
	t.Logf("the first call of a script: %v, round trip %v", took, roundTrip)
	assert.EqualValues(t, 1, sent.all(), "commands sent with the call, one round trip each")
	assert.EqualValues(t, 1, sent.named("evalsha"), "the script was run by its hash, its source never sent")
}

// Released waits on nothing: the release-notice subscription of a Locker is opened in the
// background when it is made, and Released used to open it, waiting for Redis to confirm it (up
// to a second) while holding the notices' mutex. On a link that passes nothing, where a call
// waiting for Redis would never return, Released returns and sends no command, whether its
// Locker's subscription was confirmed or is still unanswered. The release is still heard by a
// waiter whose attempt found the key held.
func TestLocker_ReleasedWaitsForNoRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, link := slowRedis(t, 400*time.Millisecond, 2*time.Second, 4)
	waiter, key, held := heldByAnother(t, client)
	// Confirmed first, the Lockers' subscriptions send nothing more that could be counted as
	// Released's.
	awaitPatternSubscribers(t, client, 2)

	link.Freeze()
	sent := countCommands(client)
	released, stop := releasedWhileFrozen(t, waiter, key)
	defer stop()
	assert.EqualValues(t, 0, sent.all(), "commands sent with Released")
	// Made while Redis answers nothing, this Locker's subscription stays unconfirmed.
	unconfirmed := rgredis.NewLocker(client)
	t.Cleanup(func() { _ = unconfirmed.Close() })
	_, stopUnconfirmed := releasedWhileFrozen(t, unconfirmed, key)
	stopUnconfirmed()
	link.Thaw()

	_, err := waiter.TryAcquire(ctx, key, time.Minute)
	require.ErrorIs(t, err, ports.ErrLockNotAcquired)
	require.NoError(t, held.Release(ctx))
	select {
	case <-released:
	case <-time.After(noticeBound):
		t.Fatal("the waiter heard no release")
	}
}

// releasedWhileFrozen calls l.Released(key) while Redis answers nothing, and fails t unless it
// returns within noticeBound, seconds beyond any pause of a busy runner.
func releasedWhileFrozen(t *testing.T, l *rgredis.Locker, key string) (released <-chan struct{}, stop func()) {
	t.Helper()
	type listener struct {
		released <-chan struct{}
		stop     func()
	}
	returned := make(chan listener, 1)
	go func() {
		released, stop := l.Released(key)
		returned <- listener{released, stop}
	}()
	select {
	case got := <-returned:
		return got.released, got.stop
	case <-time.After(noticeBound):
		t.Fatal("Released waited for a Redis that answers nothing")
		return nil, nil
	}
}

// A process's first contended lock is four round trips on connections already open: the SET,
// redsync's cleanup (its own script, which redsync sends by hash and, answered NOSCRIPT, by
// source, once per Redis) and the waiting flag, whose script was loaded at start. Loaded on
// first use, the flag's cost an EVALSHA answered NOSCRIPT and an EVAL more.
func TestWarmUp_TheFirstContendedLockIsFourRoundTrips(t *testing.T) {
	t.Parallel()
	const roundTrip = 400 * time.Millisecond
	ctx := context.Background()
	// The attempt's budget is one call's timeout: four round trips leave room in it.
	client, _ := slowRedis(t, roundTrip, 4*time.Second, 4)
	waiter, key, held := heldByAnother(t, client)
	t.Cleanup(func() { _ = held.Release(ctx) })
	// The Lockers' release-notice subscriptions, opened in the background as at a process's
	// start, are confirmed first: a subscription's handshake is a command too, and the flag waits
	// for the waiter's.
	awaitPatternSubscribers(t, client, 2)
	sent := countCommands(client)

	started := time.Now()
	_, err := waiter.TryAcquire(ctx, key, time.Minute)
	took := time.Since(started)

	require.ErrorIs(t, err, ports.ErrLockNotAcquired)
	t.Logf("the first contended lock: %v, round trip %v", took, roundTrip)
	assert.EqualValues(t, 4, sent.all(), "commands sent with the attempt, one round trip each")
	assert.EqualValues(t, 1, sent.named("eval"), "scripts sent by source with the attempt: redsync's cleanup alone")
}

// On a Redis whose round trip is over half the timeout, a call on a connection it opened itself
// failed: its handshake and its command, two round trips, outlast the timeout however fast the
// runner. The connections are opened and handshaken at start, so every call of a crowd as large
// as the pool, and a pipeline, answers, each sending its own commands and no handshake. A call's
// one round trip leaves 0.9 s of its timeout for a busy runner's pauses, which stretched a
// 400 ms round trip by up to 400 ms.
func TestWarmUp_CallsAnswerOnARedisSlowerThanHalfTheTimeout(t *testing.T) {
	t.Parallel()
	const (
		timeout   = 2 * time.Second
		roundTrip = 1100 * time.Millisecond
		poolSize  = 4
	)
	ctx := context.Background()
	client, _ := slowRedis(t, roundTrip, timeout, poolSize)
	sent := countCommands(client)

	var (
		wg       sync.WaitGroup
		answered atomic.Int32
	)
	for range poolSize {
		wg.Go(func() {
			started := time.Now()
			if assert.NoError(t, rgredis.Ping(ctx, client)) {
				answered.Add(1)
			}
			t.Logf("a call: %v, round trip %v, timeout %v", time.Since(started), roundTrip, timeout)
		})
	}
	wg.Wait()
	assert.EqualValues(t, poolSize, answered.Load(), "calls that answered, each on a connection of its own")
	assert.EqualValues(t, poolSize, sent.all(), "commands sent with the calls, handshakes included")

	_, err := client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.Ping(ctx)
		p.Ping(ctx)
		return nil
	})
	assert.NoError(t, err, "a pipeline")
	assert.EqualValues(t, poolSize+2, sent.all(), "commands sent with the calls and the pipeline, handshakes included")
}
