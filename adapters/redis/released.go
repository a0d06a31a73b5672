package redis

import (
	"context"
	"crypto/rand"
	"log/slog"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// releaseChannelPrefix starts the Pub/Sub channel a release of key is announced on:
// "rushgate:lock-released:<key>". The message is the releasing Locker's origin id.
const releaseChannelPrefix = "rushgate:lock-released:"

// subscribeTimeout bounds how long the first Released call of a Locker waits for Redis to
// confirm the subscription, so that a release published right after that call is heard. When
// Redis does not confirm in time, go-redis keeps trying in the background.
const subscribeTimeout = time.Second

// releaseNotices fans one pattern subscription per Locker out to this process's listeners,
// however many keys they wait on.
type releaseNotices struct {
	client goredis.UniversalClient
	// origin tells this Locker's own notices apart when they come back from Redis: its
	// listeners were already told when the release returned.
	origin string

	mu        sync.Mutex
	listeners map[string]map[chan struct{}]struct{} // key → channels to close on its release
	pubsub    *goredis.PubSub                       // nil until the first listener
	done      chan struct{}                         // closed when dispatch ends
	closed    bool
}

func newReleaseNotices(c goredis.UniversalClient) *releaseNotices {
	return &releaseNotices{
		client:    c,
		origin:    rand.Text(),
		listeners: map[string]map[chan struct{}]struct{}{},
	}
}

// listen registers a channel closed on the next notice for key, subscribing first if this is
// the first listener. After close it returns a channel that never closes: waiters bound their
// waits anyway, and a closed one would have them spin.
func (n *releaseNotices) listen(key string) (<-chan struct{}, func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return make(chan struct{}), func() {}
	}
	if n.pubsub == nil {
		n.subscribe()
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

// subscribe starts the one pattern subscription and its dispatch goroutine. n.mu is held.
func (n *releaseNotices) subscribe() {
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	defer cancel()
	n.pubsub = n.client.PSubscribe(ctx, releaseChannelPrefix+"*")
	if _, err := n.pubsub.Receive(ctx); err != nil {
		// Notices are hints: carry on, go-redis resubscribes when it reconnects.
		slog.Debug("lock release notices: subscription not confirmed", "error", err)
	}
	n.done = make(chan struct{})
	go n.dispatch(n.pubsub.Channel())
}

// dispatch wakes the listeners of every key released elsewhere, until the subscription closes.
func (n *releaseNotices) dispatch(messages <-chan *goredis.Message) {
	defer close(n.done)
	for msg := range messages {
		if msg.Payload != n.origin {
			n.notify(strings.TrimPrefix(msg.Channel, releaseChannelPrefix))
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
	pubsub, done := n.pubsub, n.done
	n.mu.Unlock()
	if alreadyClosed || pubsub == nil {
		return nil
	}
	err := pubsub.Close()
	<-done
	if err != nil {
		return unavailable("close lock release subscription", err)
	}
	return nil
}
