package contract_test

import (
	"net"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	rgredis "github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/test/testenv"
)

// redisURL returns the URL of the test Redis, one server (skipped or failed per testenv when
// it is down).
func redisURL(t testing.TB) string {
	t.Helper()
	return "redis://" + testenv.RedisAddr(t)
}

// deadRedisAddrs names Redis addresses that cannot serve: one refuses connections, the other
// accepts them and never answers, so only the client's timeouts end the wait.
func deadRedisAddrs(t *testing.T) map[string]string {
	t.Helper()
	return map[string]string{
		"refusing": "127.0.0.1:1",
		"silent":   silentServer(t),
	}
}

// silentServer accepts TCP connections and never replies, like a hung Redis.
func silentServer(t *testing.T) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = listener.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, conn := range held {
				_ = conn.Close()
			}
		}()
		for {
			conn, err := listener.Accept()
			if err != nil {
				return // listener closed at cleanup
			}
			held = append(held, conn)
		}
	}()
	return listener.Addr().String()
}

// deadRedisTimeout is the client timeout of the tests about a dead Redis, which measure their
// time bounds against it: half of it, a second, is room for a busy runner on either side of a
// bound between one timeout and two.
const deadRedisTimeout = 2 * time.Second

// newDeadRedisClient returns a client with deadRedisTimeout to the (dead) Redis at addr.
func newDeadRedisClient(t *testing.T, addr string) goredis.UniversalClient {
	t.Helper()
	return newRedisClientOptions(t, "redis://"+addr, rgredis.Options{
		DialTimeout: deadRedisTimeout, ReadTimeout: deadRedisTimeout, WriteTimeout: deadRedisTimeout})
}

// newRedisClientURL returns a client to the Redis at url with testenv's generous timeouts (the
// suites run up to 1,000 callers at once through one pool), closed when the test ends.
func newRedisClientURL(t *testing.T, url string) goredis.UniversalClient {
	t.Helper()
	return newRedisClientOptions(t, url, rgredis.Options{
		DialTimeout: testenv.DependencyTimeout, ReadTimeout: testenv.DependencyTimeout, WriteTimeout: testenv.DependencyTimeout})
}

func newRedisClientOptions(t *testing.T, url string, opts rgredis.Options) goredis.UniversalClient {
	t.Helper()
	client, err := rgredis.NewClient(url, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	return client
}
