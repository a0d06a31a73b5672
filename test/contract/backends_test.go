// Package contract_test runs the port suites of ports/porttest against every backend rushgate
// ships (memory, Postgres, MySQL, Redis, Redis Cluster), plus the adapters' own infrastructure sentences.
package contract_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/adapters/memory"
	rgredis "github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/ports/porttest"
	"github.com/rushgate/rushgate/test/testenv"
)

// contractTxTimeout is roomy so that 50 transactions queued on one row lock under -race finish
// in time; the timeout cases ask for their own.
const contractTxTimeout = 30 * time.Second

// suite prepares one backend for one run of a porttest suite: fresh storage, the suite's
// constructor on it, and what the backend can do.
type suite[P any] func(t *testing.T) (open func(t *testing.T) P, caps porttest.Capabilities)

// backend is one storage the suites run against; a nil suite is a port it does not implement.
type backend struct {
	name        string
	stores      suite[ports.Stores]
	locker      suite[ports.Locker]
	idempotency suite[ports.IdempotencyStore]
	waitingRoom suite[ports.WaitingRoom]
	pushQueue   suite[porttest.PushRoom]
}

// backends lists every implementation rushgate ships.
var backends = []backend{
	{name: "memory", stores: memoryStores, locker: memoryLocker, idempotency: memoryIdempotency, waitingRoom: memoryWaitingRoom,
		pushQueue: memoryPushQueue},
	{name: "postgres", stores: sqlStores(testenv.Postgres)},
	{name: "mysql", stores: sqlStores(testenv.MySQL)},
	{name: "redis", locker: redisLocker(redisURL), idempotency: redisIdempotency(redisURL),
		waitingRoom: redisWaitingRoom(redisURL), pushQueue: redisPushQueue(redisURL)},
	{name: "redis-cluster", locker: redisLocker(testenv.RedisCluster), idempotency: redisIdempotency(testenv.RedisCluster),
		waitingRoom: redisWaitingRoom(testenv.RedisCluster), pushQueue: redisPushQueue(testenv.RedisCluster)},
}

// runOnBackends runs a porttest suite, in parallel, on every backend implementing the port that
// port picks.
func runOnBackends[P any](t *testing.T, port func(backend) suite[P],
	check func(t *testing.T, open func(t *testing.T) P, caps porttest.Capabilities)) {
	for _, b := range backends {
		prepare := port(b)
		if prepare == nil {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			open, caps := prepare(t)
			check(t, open, caps)
		})
	}
}

func storesOf(b backend) suite[ports.Stores]                { return b.stores }
func lockerOf(b backend) suite[ports.Locker]                { return b.locker }
func idempotencyOf(b backend) suite[ports.IdempotencyStore] { return b.idempotency }
func waitingRoomOf(b backend) suite[ports.WaitingRoom]      { return b.waitingRoom }
func pushQueueOf(b backend) suite[porttest.PushRoom]        { return b.pushQueue }

// memoryPushQueue gives every caller the one store of the suite, on the wall clock; stores on a
// clock of the case's own are new ones.
func memoryPushQueue(*testing.T) (func(*testing.T) porttest.PushRoom, porttest.Capabilities) {
	room := memory.NewWaitingRoom(system.Clock{})
	return func(*testing.T) porttest.PushRoom { return room }, porttest.Capabilities{
		NewPushRoomOnClock: func(_ *testing.T, clock ports.Clock) porttest.PushRoom { return memory.NewWaitingRoom(clock) }}
}

// memoryStores gives every caller the stores of one in-memory database.
func memoryStores(*testing.T) (func(*testing.T) ports.Stores, porttest.Capabilities) {
	stores := memory.NewStores(memory.NewDatabase())
	return func(*testing.T) ports.Stores { return stores },
		porttest.Capabilities{NewEmptyStores: func(*testing.T) ports.Stores { return memory.NewStores(memory.NewDatabase()) }}
}

// memoryLocker gives every caller a Locker of its own: in-process locks are not shared.
func memoryLocker(*testing.T) (func(*testing.T) ports.Locker, porttest.Capabilities) {
	return func(*testing.T) ports.Locker { return memory.NewCoordination(system.Clock{}).Locker }, porttest.Capabilities{}
}

// memoryIdempotency gives every caller a store of its own: in-process records are not shared.
func memoryIdempotency(*testing.T) (func(*testing.T) ports.IdempotencyStore, porttest.Capabilities) {
	return func(*testing.T) ports.IdempotencyStore { return memory.NewCoordination(system.Clock{}).Idempotency },
		porttest.Capabilities{}
}

// memoryWaitingRoom gives every caller the one store of the suite, on the wall clock.
func memoryWaitingRoom(*testing.T) (func(*testing.T) ports.WaitingRoom, porttest.Capabilities) {
	room := memory.NewCoordination(system.Clock{}).WaitingRoom
	return func(*testing.T) ports.WaitingRoom { return room }, porttest.Capabilities{}
}

// sqlStores creates a fresh database on the server fresh names and gives every caller stores on
// a pool of its own to it, as separate instances of a deployment have; empty stores get a fresh
// database of their own.
func sqlStores(fresh func(testing.TB) testenv.Database) suite[ports.Stores] {
	return func(t *testing.T) (func(*testing.T) ports.Stores, porttest.Capabilities) {
		database := fresh(t)
		withTxTimeout := func(t *testing.T, timeout time.Duration) ports.Stores {
			opts := testenv.DBOptions()
			opts.TxTimeout = timeout
			return gormdb.NewStores(openSQL(t, database, opts))
		}
		open := func(t *testing.T) ports.Stores { return withTxTimeout(t, contractTxTimeout) }
		empty := func(t *testing.T) ports.Stores {
			opts := testenv.DBOptions()
			opts.TxTimeout = contractTxTimeout
			return gormdb.NewStores(openSQL(t, fresh(t), opts))
		}
		return open, porttest.Capabilities{NewStoresWithTxTimeout: withTxTimeout, NewEmptyStores: empty}
	}
}

// openSQL opens and migrates database d, closing it when the test ends.
func openSQL(t *testing.T, d testenv.Database, opts gormdb.Options) *gormdb.DB {
	t.Helper()
	ctx := context.Background()
	db, err := gormdb.Open(ctx, d.URL, opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	require.NoError(t, gormdb.Migrate(ctx, db))
	return db
}

// redisCoordination returns the Redis coordination set of one instance, on a client of its own
// to the Redis at url, closed when the test ends. Its waiting room, unused by these suites,
// keys under a prefix of its own.
func redisCoordination(t *testing.T, url string) ports.Coordination {
	set, closeSet := rgredis.NewCoordination(newRedisClientURL(t, url), testenv.KeyPrefix())
	t.Cleanup(func() { assert.NoError(t, closeSet()) })
	return set
}

// redisLocker runs the Locker suite on the Redis (one server or a cluster) whose URL server
// returns; every instance has a client of its own, as separate processes do.
func redisLocker(server func(testing.TB) string) suite[ports.Locker] {
	return func(t *testing.T) (func(*testing.T) ports.Locker, porttest.Capabilities) {
		url := server(t)
		return func(t *testing.T) ports.Locker { return redisCoordination(t, url).Locker },
			porttest.Capabilities{SharedInstances: true}
	}
}

// redisIdempotency runs the IdempotencyStore suite as redisLocker does the Locker suite.
func redisIdempotency(server func(testing.TB) string) suite[ports.IdempotencyStore] {
	return func(t *testing.T) (func(*testing.T) ports.IdempotencyStore, porttest.Capabilities) {
		url := server(t)
		return func(t *testing.T) ports.IdempotencyStore { return redisCoordination(t, url).Idempotency },
			porttest.Capabilities{SharedInstances: true}
	}
}

// redisWaitingRoom runs the WaitingRoom suite as redisLocker does the Locker suite. Its
// instances share a key prefix of the suite's own: the rooms' index and the brokers' set are
// whole-prefix keys, which another process on the same Redis (another test run) would share.
func redisWaitingRoom(server func(testing.TB) string) suite[ports.WaitingRoom] {
	return func(t *testing.T) (func(*testing.T) ports.WaitingRoom, porttest.Capabilities) {
		url, prefix := server(t), testenv.KeyPrefix()
		return func(t *testing.T) ports.WaitingRoom { return newRedisWaitingRoom(t, url, prefix) }, porttest.Capabilities{SharedInstances: true}
	}
}

// redisPushQueue runs the PushQueue suite on the same store as redisWaitingRoom.
func redisPushQueue(server func(testing.TB) string) suite[porttest.PushRoom] {
	return func(t *testing.T) (func(*testing.T) porttest.PushRoom, porttest.Capabilities) {
		url, prefix := server(t), testenv.KeyPrefix()
		return func(t *testing.T) porttest.PushRoom { return newRedisWaitingRoom(t, url, prefix) }, porttest.Capabilities{SharedInstances: true}
	}
}

func newRedisWaitingRoom(t *testing.T, url, prefix string) *rgredis.WaitingRoom {
	return rgredis.NewWaitingRoom(newRedisClientURL(t, url), prefix)
}
