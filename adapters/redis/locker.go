package redis

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/ports"
)

// lockKeyPrefix namespaces lock keys in a Redis shared with other data.
const lockKeyPrefix = "rushgate:lock:"

// lockKey is the Redis key holding key's lock, and waitingKey the flag that someone failed to
// take it. The hash tag keeps both in one Cluster slot, so one script can touch both.
func lockKey(key string) string    { return lockKeyPrefix + "{" + key + "}" }
func waitingKey(key string) string { return lockKey(key) + ":waiting" }

// acquireBudgetFactor bounds one TryAcquire, including the cleanup DEL redsync sends after a
// failed attempt, to half the lock's TTL, and to one call's timeout (NewClient's ReadTimeout):
// a frozen Redis then costs an attempt one timeout, as any other call, not the SET's and the
// cleanup's in a row (2 s of a seat lock's 5 s lease). redsync's default per-attempt timeout
// (5%, 50 ms at a 1 s TTL) is meant for quorums over many nodes; against one Redis it turns
// ordinary scheduling delays under load into ErrUnavailable. Half the TTL still leaves the
// winner most of its lease.
const acquireBudgetFactor = 0.5

var (
	_ ports.Locker = (*Locker)(nil)
	_ ports.Lock   = (*lock)(nil)
)

// Locker is a ports.Locker on one Redis (or one Sentinel/Cluster deployment) via go-redsync.
// A failed TryAcquire flags the key as waited for, and the release of a flagged key is announced
// on Redis Pub/Sub; each Locker holds one pattern subscription, opened in the background when
// it is made, that wakes this process's waiters. Uncontended keys, the common case, cost no Pub/Sub
// traffic. Close ends the subscription. It is safe for concurrent use.
type Locker struct {
	client goredis.UniversalClient
	// calls pipelines the take and release of locks across callers; the rest goes to client.
	calls   *pipelined
	redsync *redsync.Redsync
	notices *releaseNotices
	// callTimeout is what one call to client may take (0: unknown).
	callTimeout time.Duration
}

// NewLocker returns a Locker that keeps its locks in c under "rushgate:lock:{<key>}" and
// announces the releases of contended ones on "rushgate:lock-released:<key>". Call Close when
// done with it; c stays open, its owner closes it.
func NewLocker(c goredis.UniversalClient) *Locker {
	calls := withPipelining(c)
	return &Locker{client: c, calls: calls, redsync: redsync.New(redsyncgoredis.NewPool(calls)), notices: newReleaseNotices(c),
		callTimeout: callTimeoutOf(c)}
}

// callTimeoutOf is the bound a client built by NewClient gives each call, its ReadTimeout; 0 for
// a client of another kind.
func callTimeoutOf(c goredis.UniversalClient) time.Duration {
	switch c := c.(type) {
	case *goredis.Client:
		return c.Options().ReadTimeout
	case *goredis.ClusterClient:
		return c.Options().ReadTimeout
	}
	return 0
}

// Released returns a channel closed once key is released after the call, by this Locker, or by
// any other on the same Redis once a TryAcquire of the key failed; call stop when no longer
// interested. It never waits on Redis. A notice can be lost, when the subscription is down or
// after Close, so waiters bound their waits. See ports.Locker.
func (l *Locker) Released(key string) (released <-chan struct{}, stop func()) {
	return l.notices.listen(key)
}

// Close ends the release-notice subscription; channels from Released no longer close. Locks
// held stay held until released or expired.
func (l *Locker) Close() error {
	return l.notices.close()
}

// TryAcquire makes one attempt to lock key for ttl. It returns ports.ErrLockNotAcquired when
// another owner holds the key, and an error wrapping ports.ErrUnavailable when Redis cannot be
// reached or does not answer within half the TTL or one call's timeout. The SET of an attempt
// that failed so may still run once Redis answers again and hold the key for nobody until the
// TTL ends: it is released, if so, in the background (undoLater).
func (l *Locker) TryAcquire(ctx context.Context, key string, ttl time.Duration) (ports.Lock, error) {
	if ttl < time.Millisecond {
		// SET PX takes whole milliseconds, and go-redis reads a zero TTL as "never expires".
		return nil, fmt.Errorf("redis: lock %q: ttl %v must be at least 1ms", key, ttl)
	}
	// redsync derives the cleanup's timeout afresh from ctx; a deadline on ctx itself keeps a
	// silent server from costing the budget twice.
	budget := time.Duration(float64(ttl) * acquireBudgetFactor)
	if l.callTimeout > 0 {
		budget = min(budget, l.callTimeout)
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	// The value is known before the attempt, for an attempt that fails to be undone with it.
	value := rand.Text()
	mutex := l.redsync.NewMutex(lockKey(key),
		redsync.WithExpiry(ttl),
		redsync.WithTries(1),
		redsync.WithTimeoutFactor(acquireBudgetFactor),
		redsync.WithGenValueFunc(func() (string, error) { return value, nil }),
	)
	err := mutex.TryLockContext(ctx)
	var taken *redsync.ErrTaken
	switch {
	case err == nil:
		return &lock{mutex: mutex, locker: l, key: key}, nil
	case errors.As(err, &taken), errors.Is(err, redsync.ErrFailed):
		// ErrFailed without a Redis error: the SET succeeded too late to leave any validity,
		// and redsync already deleted it again. Either way the key is not ours.
		l.flagWaiting(ctx, key, ttl)
		return nil, fmt.Errorf("redis: lock %q: %w", key, ports.ErrLockNotAcquired)
	default:
		// A timeout included: a Redis that does not answer is unavailable, not contended. Read
		// as contention, a frozen Redis sent the guard into seconds of backoff ending in 429.
		undoLater(err, ttl, func(ctx context.Context) error { _, err := l.release(ctx, key, value); return err })
		return nil, unavailable(fmt.Sprintf("lock %q", key), err)
	}
}

// flagWaitingScript flags that someone waits for the lock, for as long as the lock's TTL, and
// answers whether the lock is still held.
//
// KEYS[1] lock, KEYS[2] waiting flag; ARGV ttl ms.
var flagWaitingScript = newScript(`
redis.call('SET', KEYS[2], '1', 'PX', ARGV[1])
return redis.call('EXISTS', KEYS[1])
`)

// flagWaiting asks for the next release of key to be announced, once the subscription that
// hears it is confirmed (within the attempt's budget). When the lock was released between the
// failed attempt and the flag, this process's waiters are woken at once instead. Notices are
// hints: a failure here only leaves waiters to their backoff.
func (l *Locker) flagWaiting(ctx context.Context, key string, ttl time.Duration) {
	l.notices.awaitSubscribed(ctx)
	held, err := flagWaitingScript.Run(ctx, l.client, []string{lockKey(key), waitingKey(key)}, ttl.Milliseconds()).Int()
	if err == nil && held == 0 {
		l.notices.notify(key)
	}
}

// lock is one acquired redsync mutex.
type lock struct {
	mutex  *redsync.Mutex
	locker *Locker
	key    string
}

// releaseScript deletes the lock if it still holds the owner's value and, when someone waits
// for it, announces the release in the same round trip; 0 means the owner no longer held it, and
// nothing is announced.
//
// KEYS[1] lock, KEYS[2] waiting flag; ARGV owner's value, release channel, releasing Locker's
// origin id.
var releaseScript = newScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
if redis.call('DEL', KEYS[2]) == 1 then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return 1
`)

// Release deletes the lock only if it still holds this owner's value, announces the release to
// other instances when one of them waits for it, and wakes this Locker's waiters on the key. It
// returns ports.ErrLockNotHeld when the TTL expired or another owner holds the key. When the
// release fails, it goes on in the background until Redis answers or the TTL has passed
// (undoUntil), so that the key is free as soon as Redis is back rather than only at the TTL's
// end, which seat locks' 5 s would make every waiter's lock wait. It does so whatever the
// failure, a refused connection included: a Cluster master killed with the lock held leaves
// it to the replica promoted in its place.
func (l *lock) Release(ctx context.Context) error {
	value := l.mutex.Value()
	released, err := l.locker.release(ctx, l.key, value)
	switch {
	case err != nil:
		go undoUntil(l.mutex.Until(), func(ctx context.Context) error {
			_, err := l.locker.release(ctx, l.key, value)
			return err
		})
		return unavailable(fmt.Sprintf("unlock %q", l.mutex.Name()), err)
	case !released:
		return fmt.Errorf("redis: unlock %q: %w", l.mutex.Name(), ports.ErrLockNotHeld)
	default:
		return nil
	}
}

// release runs releaseScript for key's owner value and wakes this Locker's waiters when it
// released the lock.
func (l *Locker) release(ctx context.Context, key, value string) (bool, error) {
	released, err := releaseScript.Run(ctx, l.calls, []string{lockKey(key), waitingKey(key)},
		value, releaseChannelPrefix+key, l.notices.origin).Int()
	if err != nil {
		return false, err
	}
	if released == 1 {
		l.notices.notify(key)
	}
	return released == 1, nil
}
