package guardtest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.IdempotencyStore = roundTripStore{}
	_ ports.Locker           = roundTripLocker{}
)

// RoundTrips counts the round trips a request makes to the guard's Redis ports (the
// IdempotencyStore and the Locker), and how many of them it waits for one after another: calls
// in flight together are one wait. Wrap the ports with Store and Locker.
//
// Every call is held, as on the wire, until another call joins it in flight, or for up to
// alone when none does; so calls a request makes at once are seen together however the
// goroutines are scheduled, and a call made alone costs the test alone. Released opens no round
// trip of its own (its subscription is shared) and is not counted.
type RoundTrips struct {
	alone time.Duration

	mu       sync.Mutex
	inFlight int           // calls in flight since the last Reset
	round    int           // Reset's count: a call started before the last one is not in inFlight
	joined   chan struct{} // closed when a call joins the ones in flight
	waits    [][]string    // the calls of each wait, in order
}

// NewRoundTrips returns a recorder that holds a call made alone for up to alone.
func NewRoundTrips(alone time.Duration) *RoundTrips {
	return &RoundTrips{alone: alone}
}

// Store wraps store so its calls are counted.
func (r *RoundTrips) Store(store ports.IdempotencyStore) ports.IdempotencyStore {
	return roundTripStore{store, r}
}

// Locker wraps locker so its calls, and its locks' releases, are counted.
func (r *RoundTrips) Locker(locker ports.Locker) ports.Locker {
	return roundTripLocker{locker, r}
}

// Waits names the calls of each sequential wait so far, e.g. "[begin+acquire release+complete]"
// (the calls of one wait sorted by name).
func (r *RoundTrips) Waits() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.waits))
	for i, calls := range r.waits {
		sorted := append([]string(nil), calls...)
		slices.Sort(sorted)
		out[i] = strings.Join(sorted, "+")
	}
	return out
}

// Reset forgets the calls counted so far, and those still in flight: the next call opens a wait
// whatever an earlier request still has on the wire (its unlock, say, on a slow machine).
func (r *RoundTrips) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits, r.inFlight = nil, 0
	r.round++
}

// call runs op as the call name: it opens a wait when none is in flight, else joins it.
func (r *RoundTrips) call(name string, op func()) {
	r.mu.Lock()
	first := r.inFlight == 0
	if first {
		r.waits = append(r.waits, []string{name})
		r.joined = make(chan struct{})
	} else {
		r.waits[len(r.waits)-1] = append(r.waits[len(r.waits)-1], name)
		select {
		case <-r.joined:
		default:
			close(r.joined)
		}
	}
	r.inFlight++
	joined, round := r.joined, r.round
	r.mu.Unlock()
	if first {
		select {
		case <-joined:
		case <-time.After(r.alone):
		}
	}
	op()
	r.mu.Lock()
	if round == r.round {
		r.inFlight--
	}
	r.mu.Unlock()
}

type roundTripStore struct {
	ports.IdempotencyStore
	r *RoundTrips
}

func (s roundTripStore) Begin(ctx context.Context, key ports.IdempotencyKey, fingerprint string, lease, ttl time.Duration) (res ports.BeginResult, err error) {
	s.r.call("begin", func() { res, err = s.IdempotencyStore.Begin(ctx, key, fingerprint, lease, ttl) })
	return res, err
}

func (s roundTripStore) Complete(ctx context.Context, key ports.IdempotencyKey, token string, response ports.StoredResponse, ttl time.Duration) (err error) {
	s.r.call("complete", func() { err = s.IdempotencyStore.Complete(ctx, key, token, response, ttl) })
	return err
}

func (s roundTripStore) Delete(ctx context.Context, key ports.IdempotencyKey, token string) (err error) {
	s.r.call("delete", func() { err = s.IdempotencyStore.Delete(ctx, key, token) })
	return err
}

type roundTripLocker struct {
	ports.Locker
	r *RoundTrips
}

func (l roundTripLocker) TryAcquire(ctx context.Context, key string, ttl time.Duration) (lock ports.Lock, err error) {
	l.r.call("acquire", func() { lock, err = l.Locker.TryAcquire(ctx, key, ttl) })
	if err != nil {
		return nil, err
	}
	return roundTripLock{lock, l.r}, nil
}

type roundTripLock struct {
	ports.Lock
	r *RoundTrips
}

func (k roundTripLock) Release(ctx context.Context) (err error) {
	k.r.call("release", func() { err = k.Lock.Release(ctx) })
	return err
}
