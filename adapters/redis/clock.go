package redis

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/ports"
)

var _ ports.Clock = (*SharedClock)(nil)

// clockSamples is how many TIME round trips a Sync takes; the one with the shortest round trip
// measures the offset, so a reply delayed by a busy Redis or network does not.
const clockSamples = 3

// clockSlotKey is never written: on a Cluster, TIME goes to the master of its slot, so that every
// instance compares its clock with the same node's.
const clockSlotKey = "rushgate:clock"

// SharedClock is a ports.Clock that instances sharing one Redis agree on: the local clock
// corrected by its offset to Redis's TIME, measured by Sync. Now is one atomic load and a read of
// the local clock, never a call to Redis. Before the first Sync that succeeds, and with no Sync
// at all, it is the local clock.
type SharedClock struct {
	client goredis.UniversalClient
	local  func() time.Time
	anchor atomic.Pointer[clockAnchor]
}

// clockAnchor pairs Redis's time with the local clock's reading at the same instant: Now is
// redis plus the local time elapsed since local. When the local clock is time.Now, its readings
// carry the monotonic clock, which measures that elapsed time: a step of the local wall clock
// (NTP setting it right) then moves Now only at the next Sync, by what it measures.
type clockAnchor struct {
	redis time.Time // UTC, no monotonic reading
	local time.Time
	// measured is whether redis was read from Redis, rather than taken from the local clock.
	measured bool
}

// at is Redis's time at the local clock's reading local, as a predicts it.
func (a *clockAnchor) at(local time.Time) time.Time { return a.redis.Add(local.Sub(a.local)) }

// NewSharedClock returns a clock of client's Redis over local, the instance's own clock (time.Now,
// or a clock set apart to play an instance whose clock is off). It is the local clock until Sync
// measures the offset.
func NewSharedClock(client goredis.UniversalClient, local func() time.Time) *SharedClock {
	c := &SharedClock{client: client, local: local}
	now := local()
	c.anchor.Store(&clockAnchor{redis: now.UTC().Round(0), local: now})
	return c
}

// Now returns Redis's time as the last Sync measured it, moved on by the local clock: UTC,
// truncated to microseconds.
func (c *SharedClock) Now() time.Time {
	return c.anchor.Load().at(c.local()).Truncate(time.Microsecond)
}

// Offset is how far Redis's clock is ahead of the local one (behind when negative), as Now stands
// now: zero before the first Sync that succeeds.
func (c *SharedClock) Offset() time.Duration {
	a := c.anchor.Load()
	if !a.measured {
		return 0
	}
	now := c.local()
	return a.at(now).Sub(now.Round(0))
}

// clockSample is one TIME round trip: Redis's answer, and the local clock's reading halfway
// between sending and receiving it, when Redis most likely read its clock.
type clockSample struct {
	redis, local time.Time
	rtt          time.Duration
}

// Sync measures the offset to Redis's TIME (clockSamples round trips, to the master of a fixed
// slot on a Cluster) and returns it. A Sync that fails keeps the offset measured last, and
// returns it with an error wrapping ports.ErrUnavailable.
func (c *SharedClock) Sync(ctx context.Context) (time.Duration, error) {
	node, err := c.node(ctx)
	if err != nil {
		return c.Offset(), unavailable("read TIME", err)
	}
	best := clockSample{rtt: math.MaxInt64}
	for range clockSamples {
		sent := c.local()
		redisTime, err := node.Time(ctx).Result()
		received := c.local()
		if err != nil {
			return c.Offset(), unavailable("read TIME", err)
		}
		if rtt := received.Sub(sent); rtt < best.rtt {
			best = clockSample{redis: redisTime.UTC(), local: sent.Add(rtt / 2), rtt: rtt}
		}
	}
	c.anchor.Store(c.anchor.Load().next(best))
	return c.Offset(), nil
}

// next is the anchor after sample s. Redis read its clock at some point of the round trip, so at
// s.local it showed a time within s.rtt/2 of s.redis. The first measurement anchors at s.redis.
// After it, an anchor whose prediction lies within that window is kept, and one outside it moves
// to the window's nearest edge: Now steps only when a sample proves it wrong, and by no more than
// it is proven wrong, so a sample's noise never moves it, and a step back is the local clock's
// drift over a Sync interval beyond the round trip (microseconds), unless Redis's own clock was
// set back (a failover to a node whose clock is behind), which every instance then follows.
func (a *clockAnchor) next(s clockSample) *clockAnchor {
	if !a.measured {
		return &clockAnchor{redis: s.redis, local: s.local, measured: true}
	}
	predicted := a.at(s.local)
	earliest, latest := s.redis.Add(-s.rtt/2), s.redis.Add(s.rtt/2)
	switch {
	case predicted.Before(earliest):
		return &clockAnchor{redis: earliest, local: s.local, measured: true}
	case predicted.After(latest):
		return &clockAnchor{redis: latest, local: s.local, measured: true}
	default:
		return a
	}
}

// node is the one Redis whose clock c reads: a Cluster's master of clockSlotKey's slot, else the
// server (a Sentinel's master).
func (c *SharedClock) node(ctx context.Context) (*goredis.Client, error) {
	switch client := c.client.(type) {
	case *goredis.ClusterClient:
		return client.MasterForKey(ctx, clockSlotKey)
	case *goredis.Client:
		return client, nil
	default:
		return nil, fmt.Errorf("client type %T not supported", client)
	}
}
