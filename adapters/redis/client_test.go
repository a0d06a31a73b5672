package redis_test

import (
	"context"
	"runtime"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := rgredis.NewClient(tt.url, rgredis.Options{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantInError)
			assert.NotContains(t, err.Error(), "s3cret")
		})
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
