package redis

import (
	"context"
	"crypto/rand"
	"strings"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"
)

// releaseChannelPrefix starts the Pub/Sub channel a release of key is announced on:
// "rushgate:lock-released:<key>". The message is the releasing Locker's origin id.
const releaseChannelPrefix = "rushgate:lock-released:"

// releaseNotices fans one pattern subscription per Locker out to this process's listeners,
// however many keys they wait on. The subscription is opened in the background when the Locker
// is made: nothing waits on Redis while holding mu, and a listener never waits for it (see
// awaitSubscribed).
type releaseNotices struct {
	// origin tells this Locker's own notices apart when they come back from Redis: its
	// listeners were already told when the release returned.
	origin string
	pubsub *goredis.PubSub
	// subscribed is closed once Redis first confirms the subscription; done when dispatch ends.
	subscribed, done chan struct{}
	// unconfirmed is set once a caller waited for the confirmation in vain: later ones do not.
	unconfirmed atomic.Bool

	mu        sync.Mutex
	listeners map[string]map[chan struct{}]struct{} // key → channels to close on its release
	closed    bool
}

// newReleaseNotices starts subscribing at once, in the background. go-redis keeps the
// subscription: it resubscribes when its connection is lost, or could not be opened.
func newReleaseNotices(c goredis.UniversalClient) *releaseNotices {
	n := &releaseNotices{
		origin:     rand.Text(),
		pubsub:     c.PSubscribe(context.Background()), // no pattern yet: opens nothing
		subscribed: make(chan struct{}),
		done:       make(chan struct{}),
		listeners:  map[string]map[chan struct{}]struct{}{},
	}
	go n.dispatch()
	return n
}

// listen registers a channel closed on the next notice for key. After close it returns a
// channel that never closes: waiters bound their waits anyway, and a closed one would have them
// spin.
func (n *releaseNotices) listen(key string) (<-chan struct{}, func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return make(chan struct{}), func() {}
	}
	released := make(chan struct{})
	if n.listeners[key] == nil {
		n.listeners[key] = map[chan struct{}]struct{}{}
	}
	n.listeners[key][released] = struct{}{}
	stop := func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.listeners[key], released)
		if len(n.listeners[key]) == 0 {
			delete(n.listeners, key)
		}
	}
	return released, stop
}

// awaitSubscribed waits, at most until ctx ends, for Redis to have confirmed the subscription
// once. A caller that asks for a release to be announced waits for it first, so that the
// announcement is heard; it costs nothing once confirmed, which a Locker made at start is long
// before its first contended key. Unconfirmed (Redis slow at start, or refusing the
// subscription), the caller carries on, and so do later callers at once until it is confirmed:
// notices are hints, and waiters poll on their backoff.
func (n *releaseNotices) awaitSubscribed(ctx context.Context) {
	if n.unconfirmed.Load() {
		return
	}
	select {
	case <-n.subscribed:
	case <-ctx.Done():
		n.unconfirmed.Store(true)
	}
}

// dispatch subscribes, then wakes the listeners of every key released elsewhere, until the
// subscription closes.
func (n *releaseNotices) dispatch() {
	defer close(n.done)
	// An error leaves the pattern registered: the receiving loop below opens the connection
	// and subscribes again.
	_ = n.pubsub.PSubscribe(context.Background(), releaseChannelPrefix+"*")
	confirmed := false
	for msg := range n.pubsub.ChannelWithSubscriptions() {
		switch msg := msg.(type) {
		case *goredis.Subscription:
			if !confirmed {
				confirmed = true
				close(n.subscribed)
			}
		case *goredis.Message:
			if msg.Payload != n.origin {
				n.notify(strings.TrimPrefix(msg.Channel, releaseChannelPrefix))
			}
		}
	}
}

// notify closes and forgets the channels of key's listeners.
func (n *releaseNotices) notify(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for released := range n.listeners[key] {
		close(released)
	}
	delete(n.listeners, key)
}

// close ends the subscription and waits for dispatch to return.
func (n *releaseNotices) close() error {
	n.mu.Lock()
	alreadyClosed := n.closed
	n.closed = true
	n.mu.Unlock()
	if alreadyClosed {
		return nil
	}
	err := n.pubsub.Close()
	<-n.done
	if err != nil {
		return unavailable("close lock release subscription", err)
	}
	return nil
}
