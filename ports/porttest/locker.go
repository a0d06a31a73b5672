package porttest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rushgate/rushgate/ports"
)

// shortLockTTL expires within the case yet leaves a remote attempt (bounded by half the TTL in
// rushgate's Redis Locker) room on a Redis shared with other work; waitBeyondShortLockTTL
// surely outlasts it.
const (
	shortLockTTL           = 2 * time.Second
	waitBeyondShortLockTTL = 3 * time.Second
	longLockTTL            = time.Minute
	// noticeBound is how long a release notice may take to arrive, across instances included,
	// on a Redis shared with other work (only a notice that never comes waits it out).
	noticeBound = 10 * time.Second
)

// TestLocker checks ports.Locker: TryAcquire takes a free key and refuses a held one with
// ports.ErrLockNotAcquired, exactly once among concurrent callers; Release frees the key at
// once, and a Release after the TTL expired or twice is ports.ErrLockNotHeld and spares a new
// owner; the TTL frees a key whose holder never releases it; Released's channel closes on a
// release of its key only, and not after stop. With Capabilities.SharedInstances it also
// checks mutual exclusion across two instances and that a release through one closes a
// listener's channel on the other within two seconds.
func TestLocker(t *testing.T, newLocker func(t *testing.T) ports.Locker, caps Capabilities) {
	run(t, newLocker, caps, []testCase[ports.Locker]{
		{"TryAcquire_TakesFreeKeyAndRefusesHeldKey", testLockerRefusesHeldKey},
		{"TryAcquire_ConcurrentCallersGetExactlyOneLock", testLockerConcurrentAcquire},
		{"TryAcquire_AnotherInstanceIsRefused", testLockerAnotherInstanceIsRefused},
		{"Release_FreesKey", testLockerReleaseFreesKey},
		{"Release_AfterExpiryAndTakeover_IsNotHeldAndSparesNewOwner", testLockerStaleReleaseSparesNewOwner},
		{"Release_Twice_IsNotHeld", testLockerReleaseTwice},
		{"TTL_ExpiryFreesKey", testLockerTTLExpiryFreesKey},
		{"Released_ReleaseOfTheKeyNotifies", testLockerReleasedNotifies},
		{"Released_StopEndsNotices", testLockerReleasedStop},
		{"Released_ReleaseOnAnotherInstanceNotifies", testLockerReleasedAcrossInstances},
	})
}

// newLockKey returns a random lock key.
func newLockKey() string { return "porttest:" + randomID() }

// acquire takes key, failing the case unless it was free.
func acquire(t *testing.T, locker ports.Locker, key string, ttl time.Duration) ports.Lock {
	t.Helper()
	held, err := locker.TryAcquire(context.Background(), key, ttl)
	must(t, err, "acquire "+key)
	return held
}

// secondInstance returns another Locker sharing the suite's locks, or skips the case.
func secondInstance(t *testing.T, e env[ports.Locker]) ports.Locker {
	t.Helper()
	if !e.caps.SharedInstances {
		t.Skip("the backend's instances do not share locks")
	}
	return e.open(t)
}

func testLockerRefusesHeldKey(t *testing.T, e env[ports.Locker]) {
	ctx := context.Background()
	key := newLockKey()
	held := acquire(t, e.impl, key, longLockTTL)

	_, err := e.impl.TryAcquire(ctx, key, longLockTTL)
	expectIs(t, err, ports.ErrLockNotAcquired, "held key")
	other := acquire(t, e.impl, key+":other", longLockTTL) // another key is independent

	must(t, held.Release(ctx), "release")
	must(t, other.Release(ctx), "release other")
}

func testLockerConcurrentAcquire(t *testing.T, e env[ports.Locker]) {
	const callers = 50
	ctx := context.Background()
	key := newLockKey()
	locks := make([]ports.Lock, callers)

	errs := startTogether(callers, func(i int) error {
		var err error
		locks[i], err = e.impl.TryAcquire(ctx, key, longLockTTL)
		return err
	})

	if winner := expectOneWinner(t, errs, ports.ErrLockNotAcquired); winner >= 0 {
		must(t, locks[winner].Release(ctx), "release")
	}
}

func testLockerAnotherInstanceIsRefused(t *testing.T, e env[ports.Locker]) {
	ctx := context.Background()
	other := secondInstance(t, e)
	key := newLockKey()
	held := acquire(t, e.impl, key, longLockTTL)

	_, err := other.TryAcquire(ctx, key, longLockTTL)
	expectIs(t, err, ports.ErrLockNotAcquired, "key held through the other instance")

	must(t, held.Release(ctx), "release")
	must(t, acquire(t, other, key, longLockTTL).Release(ctx), "the other instance takes the released key")
}

func testLockerReleaseFreesKey(t *testing.T, e env[ports.Locker]) {
	ctx := context.Background()
	key := newLockKey()

	must(t, acquire(t, e.impl, key, longLockTTL).Release(ctx), "release")

	must(t, acquire(t, e.impl, key, longLockTTL).Release(ctx), "a released key is free at once")
}

func testLockerStaleReleaseSparesNewOwner(t *testing.T, e env[ports.Locker]) {
	ctx := context.Background()
	key := newLockKey()

	stale := acquire(t, e.impl, key, shortLockTTL)
	time.Sleep(waitBeyondShortLockTTL)
	expectIs(t, stale.Release(ctx), ports.ErrLockNotHeld, "expired, nobody else yet")

	owner := acquire(t, e.impl, key, longLockTTL)
	expectIs(t, stale.Release(ctx), ports.ErrLockNotHeld, "another owner holds it")

	_, err := e.impl.TryAcquire(ctx, key, longLockTTL)
	expectIs(t, err, ports.ErrLockNotAcquired, "the stale release left the new owner's lock alone")
	must(t, owner.Release(ctx), "release")
}

func testLockerReleaseTwice(t *testing.T, e env[ports.Locker]) {
	ctx := context.Background()
	held := acquire(t, e.impl, newLockKey(), longLockTTL)
	must(t, held.Release(ctx), "release")

	expectIs(t, held.Release(ctx), ports.ErrLockNotHeld, "second release")
}

func testLockerTTLExpiryFreesKey(t *testing.T, e env[ports.Locker]) {
	ctx := context.Background()
	key := newLockKey()
	acquire(t, e.impl, key, shortLockTTL)
	_, err := e.impl.TryAcquire(ctx, key, longLockTTL)
	expectIs(t, err, ports.ErrLockNotAcquired, "held until its TTL")

	time.Sleep(waitBeyondShortLockTTL)

	must(t, acquire(t, e.impl, key, longLockTTL).Release(ctx), "a crashed holder's lock frees itself after its TTL")
}

// expectClosedWithin reports ch not closing within d.
func expectClosedWithin(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Errorf("%s: no notice within %v", what, d)
	}
}

// expectOpen reports ch already closed.
func expectOpen(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Errorf("%s: notified", what)
	default:
	}
}

func testLockerReleasedNotifies(t *testing.T, e env[ports.Locker]) {
	key := newLockKey()
	held := acquire(t, e.impl, key, longLockTTL)
	released, stop := e.impl.Released(key)
	defer stop()
	otherKey, stopOther := e.impl.Released(newLockKey())
	defer stopOther()

	must(t, held.Release(context.Background()), "release")

	expectClosedWithin(t, released, noticeBound, "listener of the released key")
	expectOpen(t, otherKey, "listener of another key")
}

// testLockerReleasedStop: of two listeners on one key, the stopped one stays silent while the
// other, closed by the same release, proves the notice was delivered.
func testLockerReleasedStop(t *testing.T, e env[ports.Locker]) {
	key := newLockKey()
	held := acquire(t, e.impl, key, longLockTTL)
	stopped, stop := e.impl.Released(key)
	listening, stopListening := e.impl.Released(key)
	defer stopListening()
	stop()

	must(t, held.Release(context.Background()), "release")

	expectClosedWithin(t, listening, noticeBound, "listener still registered")
	expectOpen(t, stopped, "stopped listener")
}

// testLockerReleasedAcrossInstances: once a TryAcquire through another instance found the key
// held, its release closes the channels of listeners there, and not of a stopped one.
func testLockerReleasedAcrossInstances(t *testing.T, e env[ports.Locker]) {
	other := secondInstance(t, e)
	key := newLockKey()
	held := acquire(t, e.impl, key, longLockTTL)
	listening, stopListening := other.Released(key)
	defer stopListening()
	stopped, stop := other.Released(key)
	stop()
	if _, err := other.TryAcquire(context.Background(), key, longLockTTL); !errors.Is(err, ports.ErrLockNotAcquired) {
		t.Fatalf("the other instance took a held key: %v", err)
	}

	must(t, held.Release(context.Background()), "release")

	expectClosedWithin(t, listening, noticeBound, "listener on the other instance")
	expectOpen(t, stopped, "stopped listener on the other instance")
}
