package contract_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rgredis "github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/ports"
)

// The adapters' infrastructure sentences: a server that refuses connections, or accepts them
// and never answers, costs a caller no more than the configured timeout.

// TestSQLOpen_UnreachableServerFailsFast: Open answers within its connect timeout with
// ports.ErrUnavailable naming the dialect and host, never the password, whether the server
// refuses connections or accepts them and stays silent.
func TestSQLOpen_UnreachableServerFailsFast(t *testing.T) {
	t.Parallel()
	const (
		password       = "s3cret-pw"
		connectTimeout = time.Second
	)
	silent := silentServer(t)
	cases := []struct {
		name, url, dialect, host string
	}{
		{"postgres refusing", "postgres://app:" + password + "@127.0.0.1:1/app?sslmode=disable", "postgres", "127.0.0.1:1"},
		{"mysql refusing", "mysql://app:" + password + "@127.0.0.1:1/app", "mysql", "127.0.0.1:1"},
		{"postgres silent", "postgres://app:" + password + "@" + silent + "/app?sslmode=disable", "postgres", silent},
		{"mysql silent", "mysql://app:" + password + "@" + silent + "/app", "mysql", silent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			db, err := gormdb.Open(context.Background(), tc.url, gormdb.Options{ConnectTimeout: connectTimeout})
			elapsed := time.Since(start)

			require.Error(t, err)
			assert.Nil(t, db)
			assert.Less(t, elapsed, connectTimeout+2*time.Second, "answered within the connect timeout")
			assert.ErrorIs(t, err, ports.ErrUnavailable)
			assert.Contains(t, err.Error(), tc.dialect)
			assert.Contains(t, err.Error(), tc.host)
			assert.NotContains(t, err.Error(), password)
		})
	}
}

// TestRedisIdempotencyStore_UnreachableRedisIsUnavailableWithoutHanging checks the store's
// infrastructure sentence on a Redis that refuses connections and on one that never answers.
func TestRedisIdempotencyStore_UnreachableRedisIsUnavailableWithoutHanging(t *testing.T) {
	t.Parallel()
	key := ports.IdempotencyKey{Scope: "user-" + rand.Text(), Key: rand.Text()}
	calls := map[string]func(context.Context, ports.IdempotencyStore) error{
		"Begin": func(ctx context.Context, s ports.IdempotencyStore) error {
			_, err := s.Begin(ctx, key, "fp", time.Minute, time.Minute)
			return err
		},
		"Complete": func(ctx context.Context, s ports.IdempotencyStore) error {
			return s.Complete(ctx, key, "token", ports.StoredResponse{Outcome: "joined"}, time.Minute)
		},
		"Delete": func(ctx context.Context, s ports.IdempotencyStore) error {
			return s.Delete(ctx, key, "token")
		},
	}
	for server, addr := range deadRedisAddrs(t) {
		for name, call := range calls {
			t.Run(server+"/"+name, func(t *testing.T) {
				t.Parallel()
				store := rgredis.NewIdempotencyStore(newDeadRedisClient(t, addr), "rushgate:contract:idem:")

				started := time.Now()
				err := call(context.Background(), store)
				elapsed := time.Since(started)

				require.ErrorIs(t, err, ports.ErrUnavailable)
				assert.Less(t, elapsed, deadRedisTimeout+deadRedisTimeout/2, "answered within the configured timeout")
			})
		}
	}
}

// TestRedisLocker_UnreachableRedisAnswersWithoutHanging checks the Locker's infrastructure
// sentences: a Redis that refuses connections, or gives no answer within half the TTL, is
// unavailable, never a hang; and Released answers at once, without waiting on Redis, with a
// channel that waits.
func TestRedisLocker_UnreachableRedisAnswersWithoutHanging(t *testing.T) {
	t.Parallel()
	for name, addr := range deadRedisAddrs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			locker := rgredis.NewLocker(newDeadRedisClient(t, addr))
			t.Cleanup(func() { _ = locker.Close() })

			started := time.Now()
			// Half the TTL is the whole timeout: the attempt's budget is the smaller.
			_, err := locker.TryAcquire(context.Background(), "contract:"+rand.Text(), 2*deadRedisTimeout)
			elapsed := time.Since(started)

			require.ErrorIs(t, err, ports.ErrUnavailable)
			assert.Less(t, elapsed, deadRedisTimeout+deadRedisTimeout/2, "answered within the configured timeout")

			started = time.Now()
			released, stop := locker.Released("contract:" + rand.Text())
			defer stop()
			// Half the subscription's confirmation that Released waited for (up to a second):
			// room for a busy runner, none for a wait on the silent Redis.
			assert.Less(t, time.Since(started), 500*time.Millisecond, "Released waits on nothing")
			select {
			case <-released:
				t.Error("a notice without a release")
			default:
			}
		})
	}
}
