package memory

import "github.com/rushgate/rushgate/ports"

// NewStores returns the TxRunner and every repository on d, so that a use case's writes
// through any of them share d's transactions.
func NewStores(d *Database) ports.Stores {
	return ports.Stores{
		Tx:             d,
		Crews:          NewCrewRepository(d),
		CrewMembers:    NewCrewMemberRepository(d),
		Markers:        NewIdempotencyMarkerRepository(d),
		Coupons:        NewCouponRepository(d),
		UserCoupons:    NewUserCouponRepository(d),
		Wallets:        NewWalletRepository(d),
		Products:       NewProductRepository(d),
		Carts:          NewCartRepository(d),
		Orders:         NewOrderRepository(d),
		Stock:          NewStockRepository(d),
		Outbox:         NewOutboxRepository(d),
		Challenges:     NewChallengeRepository(d),
		UploadSessions: NewUploadSessionRepository(d),
		Verifications:  NewVerificationRepository(d),
		Events:         NewEventRepository(d),
		Seats:          NewSeatRepository(d),
		Reservations:   NewReservationRepository(d),
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
