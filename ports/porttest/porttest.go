// Package porttest checks an implementation of rushgate's ports against the sentences of their
// doc comments: one exported suite per port family, which rushgate runs on its own adapters
// (memory, Postgres, MySQL, Redis) and anyone can run on theirs:
//
//	func TestMyLocker(t *testing.T) {
//		porttest.TestLocker(t, func(t *testing.T) ports.Locker { return mylock.New(client(t)) },
//			porttest.Capabilities{SharedInstances: true})
//	}
//
// A suite calls its constructor once and runs every case in parallel on that instance; cases
// that need a second instance call the constructor again. Cases isolate themselves with random
// ids and keys, so every instance may share one storage; the few that cannot ask for an empty
// one (Capabilities.NewEmptyStores). Capabilities says what a backend can
// do beyond what every implementation must; cases that need more are skipped.
//
// The package depends on the standard library, ports, domain and test/testkit (itself the
// standard library only), so that importing it puts nothing else into an adapter's tests.
package porttest

import (
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

// Capabilities says what a backend does beyond the ports' minimum. A zero field means it does
// not, and the cases that check it are skipped.
type Capabilities struct {
	// NewStoresWithTxTimeout returns stores on the same storage as the suite's, whose TxRunner
	// ends any transaction still running after timeout and fails it with an error wrapping
	// ports.ErrUnavailable, as real databases do (gormdb.Options.TxTimeout). Read by
	// TestTxRunner.
	NewStoresWithTxTimeout func(t *testing.T, timeout time.Duration) ports.Stores
	// SharedInstances means that the instances a suite's constructor returns on separate calls
	// share their state, as processes sharing one Redis do: a lock held through one is refused
	// through another, a release through one is announced to the other's Released listeners,
	// and an idempotency record begun through one is seen through the other. Read by TestLocker
	// and TestIdempotencyStore.
	SharedInstances bool
	// NewEmptyStores returns stores on an empty storage of their own. An outbox claim without an
	// id takes any due message, other cases' too, and the order case must know every message in
	// the table, so the cases that claim so need a table to themselves. Read by
	// TestPaymentRepositories.
	NewEmptyStores func(t *testing.T) ports.Stores
	// NewPushRoomOnClock returns an empty store whose times are clock's, which the case moves,
	// so wait errors are exact. Read by TestWaitPredictor.
	NewPushRoomOnClock func(t *testing.T, clock ports.Clock) PushRoom
}

// env is what a case runs on: the suite's shared instance, the constructor for cases that need
// another one, and the backend's capabilities.
type env[P any] struct {
	impl P
	open func(t *testing.T) P
	caps Capabilities
}

// testCase is one sentence of a port's contract.
type testCase[P any] struct {
	name string
	run  func(t *testing.T, e env[P])
}

// run opens the suite's instance and runs every case on it in parallel.
func run[P any](t *testing.T, open func(t *testing.T) P, caps Capabilities, cases []testCase[P]) {
	t.Helper()
	e := env[P]{impl: open(t), open: open, caps: caps}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, e)
		})
	}
}

// must stops the case when a step it depends on failed.
func must(t *testing.T, err error, step string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
}

// expectIs reports err not matching want (errors.Is; nil matches only nil).
func expectIs(t *testing.T, err, want error, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want %v", what, err, want)
	}
}

// expectEqual reports got differing from want.
func expectEqual[T comparable](t *testing.T, got, want T, what string) {
	t.Helper()
	if got != want {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

// now is a timestamp as ports.Clock gives it: UTC, microsecond precision.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// randomID returns a random 26-character id, unique across cases and runs.
func randomID() string { return rand.Text() }

// startTogether runs fn n times concurrently, released at once so that the calls race, and
// returns each call's error by index.
func startTogether(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	testkit.StartTogether(n, func(i int) { errs[i] = fn(i) })
	return errs
}

// expectOneWinner checks that exactly one of errs is nil and all others match lost, and
// returns the winner's index (-1 when there is none).
func expectOneWinner(t *testing.T, errs []error, lost error) int {
	t.Helper()
	winner, winners := -1, 0
	for i, err := range errs {
		if err == nil {
			winner = i
			winners++
			continue
		}
		expectIs(t, err, lost, "a loser")
	}
	expectEqual(t, winners, 1, "winners")
	return winner
}
