package testenv

import (
	"time"

	"github.com/rushgate/rushgate/adapters/gormdb"
)

// The settings tests give the services they use, in one place. They are generous: on a runner
// whose Postgres, MariaDB and Redis are busy with other jobs, a query, a connection or a lock
// attempt can take seconds, and a test that is not about a timeout must fail only for what it
// tests (a 503 there is a real failure). A test about a timeout sets its own short one and
// measures its time bound against what it set.
const (
	// DependencyTimeout bounds connecting to a database, Redis or object store and each call
	// on it.
	DependencyTimeout = 10 * time.Second
	// LockTTL is a guard lock's expiry. A lock attempt Redis has not answered within half of it
	// counts as Redis unavailable, so it must leave room for a loaded Redis.
	LockTTL = 10 * time.Second
	// LockRetries gives a request queued behind a lock about 13 s of backoff (100 ms doubling),
	// not the production 3.1 s: contention limits are the guard's own tests' subject.
	LockRetries = 7
)

// DBOptions are gormdb's options with DependencyTimeout for connecting and for each
// transaction; a test changes a field where it needs another.
func DBOptions() gormdb.Options {
	return gormdb.Options{ConnectTimeout: DependencyTimeout, TxTimeout: DependencyTimeout}
}

// KeyPrefix returns a Redis key prefix no other test, and no other run of the suite on the same
// Redis, uses: for stores whose keys include whole-prefix ones (an index of rooms, a set of
// brokers) that would otherwise be shared.
func KeyPrefix() string { return "rushgate-test:" + randomHex(8) + ":" }
