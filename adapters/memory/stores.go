package memory

import "github.com/rushgate/rushgate/ports"

// NewStores returns d as the TxRunner, its idempotency markers and every flow's store set on
// it, so that a use case's writes through any of them share d's transactions.
func NewStores(d *Database) ports.Stores {
	return ports.Stores{
		Tx:                 d,
		Markers:            NewIdempotencyMarkerRepository(d),
		CrewStores:         NewCrewStores(d),
		CommerceStores:     NewCommerceStores(d),
		VerificationStores: NewVerificationStores(d),
		WaitingStores:      NewWaitingStores(d),
	}
}

// NewCoordination returns an in-process Locker, IdempotencyStore and WaitingRoom whose TTLs run on clock,
// for a single instance (several instances need a shared backend such as Redis).
func NewCoordination(clock ports.Clock) ports.Coordination {
	room := NewWaitingRoom(clock)
	return ports.Coordination{
		Locker:      NewLocker(clock),
		Idempotency: NewIdempotencyStore(clock),
		WaitingRoom: room,
		PushQueue:   room,
	}
}
