package redis_test

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rgredis "github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
)

func TestNewClient_SingleServerAppliesURLAndDefaults(t *testing.T) {
	t.Parallel()
	client, err := rgredis.NewClient("redis://:s3cret@cache.internal:6380/2", rgredis.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })

	require.IsType(t, &goredis.Client{}, client)
	opts := client.(*goredis.Client).Options()
	assert.Equal(t, "cache.internal:6380", opts.Addr)
	assert.Equal(t, "s3cret", opts.Password)
	assert.Equal(t, 2, opts.DB)
	assert.Nil(t, opts.TLSConfig)
	assert.Equal(t, rgredis.DefaultDialTimeout, opts.DialTimeout)
	assert.Equal(t, rgredis.DefaultReadTimeout, opts.ReadTimeout)
	assert.Equal(t, rgredis.DefaultWriteTimeout, opts.WriteTimeout)
	assert.Equal(t, max(64, 10*runtime.GOMAXPROCS(0)), opts.PoolSize)
	assert.True(t, opts.ContextTimeoutEnabled)
	assert.True(t, opts.DisableIdentity, "a new connection's handshake is HELLO alone")
	assert.Negative(t, opts.PipelinePoolSize, "pipelines share the pool WarmUp opens")
	assert.Negative(t, opts.ConnMaxIdleTime, "a connection WarmUp opened stays open however long idle")
}

func TestNewClient_OptionsOverrideDefaults(t *testing.T) {
	t.Parallel()
	client, err := rgredis.NewClient("rediss://cache.internal:6380", rgredis.Options{
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 3 * time.Second, PoolSize: 7,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })

	opts := client.(*goredis.Client).Options()
	assert.NotNil(t, opts.TLSConfig, "rediss:// is TLS")
	assert.Equal(t, time.Second, opts.DialTimeout)
	assert.Equal(t, 2*time.Second, opts.ReadTimeout)
	assert.Equal(t, 3*time.Second, opts.WriteTimeout)
	assert.Equal(t, 7, opts.PoolSize)
}

func TestNewClient_SentinelAndCluster(t *testing.T) {
	t.Parallel()
	sentinel, err := rgredis.NewClient("redis://s1:26379?master_name=main&addr=s2:26379", rgredis.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sentinel.Close() })
	assert.IsType(t, &goredis.Client{}, sentinel, "a Sentinel-backed failover client")

	cluster, err := rgredis.NewClient("redis://n1:7000?addr=n2:7000&addr=n3:7000", rgredis.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cluster.Close() })
	require.IsType(t, &goredis.ClusterClient{}, cluster)
	assert.Equal(t, []string{"n1:7000", "n2:7000", "n3:7000"}, cluster.(*goredis.ClusterClient).Options().Addrs)
}

func TestNewClient_RejectsBadURLsWithoutLeakingPassword(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, url, wantInError string
	}{
		{"wrong scheme", "http://:s3cret@host:6379", `unsupported scheme "http"`},
		{"not a URL", "redis://:s3cret@host:port", "invalid port"},
		{"database not a number", "redis://:s3cret@host:6379/zero", "invalid database number"},
		{"unknown option", "redis://:s3cret@host:6379?colour=red", "colour"},
		{"sentinel option unknown", "redis://:s3cret@s1:26379?master_name=m&colour=red", "colour"},
		{"cluster option unknown", "redis://:s3cret@n1:7000?addr=n2:7000&colour=red", "colour"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := rgredis.NewClient(tt.url, rgredis.Options{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantInError)
			assert.NotContains(t, err.Error(), "s3cret")
			// The configuration check reads a URL as NewClient does, without building a client.
			assert.Equal(t, err, rgredis.ParseURL(tt.url))
		})
	}
}

func TestParseURL_AcceptsWhatNewClientAccepts(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"redis://:s3cret@cache.internal:6380/2",
		"rediss://cache.internal:6380",
		"redis://s1:26379?master_name=main&addr=s2:26379",
		"redis://n1:7000?addr=n2:7000&addr=n3:7000",
	} {
		assert.NoError(t, rgredis.ParseURL(url), url)
	}
}

func TestPing(t *testing.T) {
	t.Parallel()
	t.Run("reachable", func(t *testing.T) {
		t.Parallel()
		client, err := rgredis.NewClient("redis://"+testenv.RedisAddr(t), rgredis.Options{DialTimeout: testenv.DependencyTimeout, ReadTimeout: testenv.DependencyTimeout, WriteTimeout: testenv.DependencyTimeout})
		require.NoError(t, err)
		t.Cleanup(func() { _ = client.Close() })
		require.NoError(t, rgredis.Ping(context.Background(), client))
	})
	t.Run("unreachable is ErrUnavailable", func(t *testing.T) {
		t.Parallel()
		client, err := rgredis.NewClient("redis://127.0.0.1:1", rgredis.Options{})
		require.NoError(t, err, "building a client does not contact the server")
		t.Cleanup(func() { _ = client.Close() })
		require.ErrorIs(t, rgredis.Ping(context.Background(), client), ports.ErrUnavailable)
	})
}

// The client's buffers are a few KiB; a value, a reply line and a pipeline's batch larger than
// them still go through whole.
func TestNewClient_RepliesAndBatchesLargerThanItsBuffersArriveWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, err := rgredis.NewClient("redis://"+testenv.RedisAddr(t), rgredis.Options{DialTimeout: testenv.DependencyTimeout, ReadTimeout: testenv.DependencyTimeout, WriteTimeout: testenv.DependencyTimeout})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	prefix := fmt.Sprintf("rg-test-buffers-%d-", time.Now().UnixNano())
	t.Cleanup(func() { _ = client.Del(context.Background(), prefix+"value", prefix+"set").Err() })

	value := strings.Repeat("v", 1<<20)
	require.NoError(t, client.Set(ctx, prefix+"value", value, time.Minute).Err())
	got, err := client.Get(ctx, prefix+"value").Result()
	require.NoError(t, err)
	assert.Equal(t, value, got, "a 1 MiB value")

	const members = 5000
	cmds, err := client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range members {
			p.SAdd(ctx, prefix+"set", fmt.Sprintf("member-%06d-%s", i, strings.Repeat("m", 40)))
		}
		p.Expire(ctx, prefix+"set", time.Minute)
		return nil
	})
	require.NoError(t, err)
	assert.Len(t, cmds, members+1)
	all, err := client.SMembers(ctx, prefix+"set").Result()
	require.NoError(t, err)
	assert.Len(t, all, members, "a pipeline of 5,000 commands, and a reply of 5,000 members")
}

// frozenServer accepts connections and never answers, as a Redis stopped with SIGSTOP does once
// the kernel has completed the handshake; it returns the address.
func frozenServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// Against a server that does not answer, a call fails within one ReadTimeout in all, although
// it waits for a pooled connection, then dials one and sends its handshake before its command.
// On a one-connection pool, a second call starting halfway through the first gets the pool only
// when the first gives up; bounded step by step, it would then wait a whole timeout more.
func TestNewClient_ACallToAFrozenServerCostsOneTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 4 * time.Second // a quarter of it, a second on either side of the bound, is room for a busy runner
	client, err := rgredis.NewClient("redis://"+frozenServer(t), rgredis.Options{
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolSize: 1,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })

	ping := func(took *time.Duration, err *error) {
		started := time.Now()
		*err = rgredis.Ping(context.Background(), client)
		*took = time.Since(started)
	}
	var (
		took [2]time.Duration
		errs [2]error
		wg   sync.WaitGroup
	)
	wg.Go(func() { ping(&took[0], &errs[0]) })
	time.Sleep(timeout / 2) // the second call starts while the first holds the only connection
	wg.Go(func() { ping(&took[1], &errs[1]) })
	wg.Wait()
	for i := range took {
		require.ErrorIs(t, errs[i], ports.ErrUnavailable)
		// A quarter of a timeout for scheduling; half a timeout more would exceed it.
		assert.LessOrEqual(t, took[i], timeout+timeout/4, "call %d", i)
	}
}

// A new connection's handshake is one round trip (HELLO), not two (HELLO, then CLIENT SETINFO
// naming the library): go-redis runs it inside the connection's first call, so on a Redis that
// answers each round trip in 150 ms a lock attempt (half a 1 s lock TTL) on a fresh connection
// spent 450 of its 500 ms before its SET could answer. A call on a new connection sends two
// commands, one round trip each. (The client's very first connection also probes maintenance
// notifications once.)
func TestNewClient_ANewConnectionCostsOneRoundTripBeforeItsCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, err := rgredis.NewClient("redis://"+testenv.RedisAddr(t), rgredis.Options{
		DialTimeout: testenv.DependencyTimeout, ReadTimeout: testenv.DependencyTimeout, WriteTimeout: testenv.DependencyTimeout, PoolSize: 2,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	// The pool's first connection, held: the call below needs a new one.
	held := client.(*goredis.Client).Conn()
	t.Cleanup(func() { _ = held.Close() })
	require.NoError(t, held.Ping(ctx).Err())
	sent := countCommands(client)

	require.NoError(t, rgredis.Ping(ctx, client))

	assert.EqualValues(t, 2, sent.all(), "commands sent with a call on a new connection, one round trip each")
	assert.EqualValues(t, 1, sent.named("hello"), "the new connection's handshake")
}
