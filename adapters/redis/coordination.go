package redis

import (
	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/ports"
)

// IdempotencyKeyPrefix starts the keys of the idempotency records NewCoordination keeps.
const IdempotencyKeyPrefix = "rushgate:idem:"

// NewCoordination returns the Locker, the IdempotencyStore and the WaitingRoom every instance of a deployment
// shares through c, the waiting rooms' keys starting with roomPrefix (WaitingRoomKeyPrefix
// unless the deployment sets its own), and the function that ends the Locker's release-notice subscription: call
// it at stop, before closing c, which stays its owner's.
func NewCoordination(c goredis.UniversalClient, roomPrefix string) (ports.Coordination, func() error) {
	locker := NewLocker(c)
	room := NewWaitingRoom(c, roomPrefix)
	return ports.Coordination{
		Locker:      locker,
		Idempotency: NewIdempotencyStore(c, IdempotencyKeyPrefix),
		WaitingRoom: room,
		PushQueue:   room,
	}, locker.Close
}
