// Package memorytest builds, in one call, what a use case's tests run on: the stores of one
// in-memory database, the in-process coordination (locker, idempotency records, waiting rooms),
// a clock the test moves and the guard on all of them. Options replace one piece at a time, so
// a test states only what it does differently. It lives outside application/ because it imports
// adapters; application tests import it from their _test.go files only.
package memorytest

import (
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/ports"
)

// Start is the time an Env's clock shows until the test moves it, unless WithClock gives
// another clock.
var Start = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

// Env is one backend on memory and a guard on it, as one server process has them.
type Env struct {
	// Clock is what the stores, the coordination and the guard read the time from.
	Clock ports.Clock
	// FakeClock is Clock when it is a memory.Clock (the default), for tests that move it; nil
	// otherwise.
	FakeClock *memory.Clock
	// Sleeper is how the guard waits out its backoff: by default memory.Sleeper, which moves
	// FakeClock instead of waiting.
	Sleeper ports.Sleeper
	// DB is the memory database under Stores; nil when WithStores gave other stores.
	DB     *memory.Database
	Stores ports.Stores
	Coord  ports.Coordination
	// Guard is the guard on Coord's locker and idempotency store and Stores' transactions.
	Guard *guard.Guard

	guardTx   ports.TxRunner
	guardCfg  guard.Config
	guardOpts []guard.Option
}

// Option changes one piece of an Env.
type Option func(*options)

type options struct {
	clock       ports.Clock
	sleeper     ports.Sleeper
	stores      *ports.Stores
	idempotency func(ports.IdempotencyStore) ports.IdempotencyStore
	locker      func(ports.Locker) ports.Locker
	guardTx     func(ports.TxRunner) ports.TxRunner
	guardCfg    guard.Config
	guardOpts   []guard.Option
}

// WithClock runs the Env on clock, the guard backing off with sleeper. Default: a memory.Clock
// at Start and a memory.Sleeper on it.
func WithClock(clock ports.Clock, sleeper ports.Sleeper) Option {
	return func(o *options) { o.clock, o.sleeper = clock, sleeper }
}

// WithStores runs the guard and the use cases on stores (another backend's, say) instead of a
// fresh memory database.
func WithStores(stores ports.Stores) Option {
	return func(o *options) { o.stores = &stores }
}

// WithIdempotency replaces the memory idempotency store by wrap's answer; wrap receives the
// memory one, to decorate or ignore.
func WithIdempotency(wrap func(ports.IdempotencyStore) ports.IdempotencyStore) Option {
	return func(o *options) { o.idempotency = wrap }
}

// WithLocker replaces the memory locker by wrap's answer; wrap receives the memory one, to
// decorate or ignore.
func WithLocker(wrap func(ports.Locker) ports.Locker) Option {
	return func(o *options) { o.locker = wrap }
}

// WithGuard builds the guard with cfg and opts. Default: guard.Config{} and no options.
func WithGuard(cfg guard.Config, opts ...guard.Option) Option {
	return func(o *options) { o.guardCfg, o.guardOpts = cfg, opts }
}

// WithGuardTx gives the guard wrap's answer as its TxRunner (to count the transactions batches
// run in, say); the Env's Stores keep the plain one.
func WithGuardTx(wrap func(ports.TxRunner) ports.TxRunner) Option {
	return func(o *options) { o.guardTx = wrap }
}

// New builds an Env. It is the one place a test backend on memory is put together.
func New(opts ...Option) *Env {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	env := &Env{Clock: o.clock, Sleeper: o.sleeper, guardCfg: o.guardCfg, guardOpts: o.guardOpts}
	if env.Clock == nil {
		clock := memory.NewClock(Start)
		env.Clock, env.Sleeper = clock, memory.NewSleeper(clock)
	}
	env.FakeClock, _ = env.Clock.(*memory.Clock)
	if o.stores != nil {
		env.Stores = *o.stores
	} else {
		env.DB = memory.NewDatabase()
		env.Stores = memory.NewStores(env.DB)
	}
	env.Coord = memory.NewCoordination(env.Clock)
	if o.idempotency != nil {
		env.Coord.Idempotency = o.idempotency(env.Coord.Idempotency)
	}
	if o.locker != nil {
		env.Coord.Locker = o.locker(env.Coord.Locker)
	}
	env.guardTx = env.Stores.Tx
	if o.guardTx != nil {
		env.guardTx = o.guardTx(env.Stores.Tx)
	}
	env.Guard = env.NewGuard()
	return env
}

// NewGuard builds another guard on the Env's ports, as a second server process builds its own
// on the database and coordination backend they share.
func (e *Env) NewGuard() *guard.Guard {
	return guard.New(guard.Deps{
		Idempotency: e.Coord.Idempotency, Locker: e.Coord.Locker, Clock: e.Clock, Sleeper: e.Sleeper,
		Tx: e.guardTx, Markers: e.Stores.Markers,
	}, e.guardCfg, e.guardOpts...)
}
