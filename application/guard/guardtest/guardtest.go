// Package guardtest helps test code built on application/guard, here and in services that embed
// it: a Sleeper that parks a lane's head until the lock it waits for is released, and an
// Observer that tells when a request has joined a lane's queue. Together they let a test hold a
// lock, queue requests in a known order, release the lock and see them served in one batch.
// LostCompletes loses every answer after its commit, and Code names an answer's error.
package guardtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.Sleeper          = Parked{}
	_ guard.Observer         = (*Queues)(nil)
	_ ports.IdempotencyStore = (*LostCompletes)(nil)
)

// LostCompletes is an IdempotencyStore that loses every Complete, as a Redis blip right after
// the commit would: the record stays IN_PROGRESS until its lease ends, and only a marker
// committed with the write can answer the retry.
type LostCompletes struct {
	ports.IdempotencyStore
	lost atomic.Int32
}

// Complete fails with ports.ErrUnavailable and stores nothing.
func (s *LostCompletes) Complete(context.Context, ports.IdempotencyKey, string, ports.StoredResponse, time.Duration) error {
	s.lost.Add(1)
	return fmt.Errorf("guardtest: lost Complete: %w", ports.ErrUnavailable)
}

// Lost is how many Completes were lost.
func (s *LostCompletes) Lost() int { return int(s.lost.Load()) }

// Code names err by its domain code: "" for nil, the error's text when it has no code.
func Code(err error) string {
	if err == nil {
		return ""
	}
	if de, ok := domain.AsError(err); ok {
		return de.Code
	}
	return err.Error()
}

// Parked is a ports.Sleeper whose waits end only when their context does: a head waiting for
// the lock moves only when the key is released or its request gives up. With a clock that moves
// only when told to (memory.Clock), no request ever runs out of its lock budget.
type Parked struct{}

// Sleep waits until ctx is done and returns its error.
func (Parked) Sleep(ctx context.Context, _ time.Duration) error {
	<-ctx.Done()
	return ctx.Err()
}

// Queues is a guard.Observer that reports every request joining a lane's queue on Joined and
// keeps the largest batch a lane served; its other events are ignored. Pass it with
// guard.WithObserver.
type Queues struct {
	joined  chan string
	largest atomic.Int64
}

// joinedBuffer bounds the unread reports; a test that queues more without reading them loses
// the rest rather than blocking the lane.
const joinedBuffer = 1024

// NewQueues returns an Observer with nothing reported yet.
func NewQueues() *Queues { return &Queues{joined: make(chan string, joinedBuffer)} }

// Joined receives the lock key of each request that joined a queue, in the order they joined.
func (q *Queues) Joined() <-chan string { return q.joined }

// Queued reports a request joining lockKey's queue.
func (q *Queues) Queued(lockKey string, _ int) {
	select {
	case q.joined <- lockKey:
	default:
	}
}

// LockAcquired is ignored.
func (*Queues) LockAcquired(string, int, time.Duration) {}

// LockExhausted is ignored.
func (*Queues) LockExhausted(string) {}

// BatchServed keeps the largest batch size.
func (q *Queues) BatchServed(_ string, size int) {
	for {
		seen := q.largest.Load()
		if int64(size) <= seen || q.largest.CompareAndSwap(seen, int64(size)) {
			return
		}
	}
}

// LargestBatch is the most requests one batch served so far.
func (q *Queues) LargestBatch() int { return int(q.largest.Load()) }

// Replayed is ignored.
func (*Queues) Replayed() {}
