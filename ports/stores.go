package ports

// Stores is one backend's transactional storage: its TxRunner and every repository, all on one
// database, so a use case's writes through any of them share one transaction. Each backend
// builds its set in one constructor (memory.NewStores, gormdb.NewStores); a new aggregate adds
// a field here and a line there.
type Stores struct {
	Tx          TxRunner
	Crews       CrewRepository
	CrewMembers CrewMemberRepository
	Markers     IdempotencyMarkerRepository
	// The commerce aggregates.
	Coupons     CouponRepository
	UserCoupons UserCouponRepository
	Wallets     WalletRepository
	Products    ProductRepository
	Carts       CartRepository
	Orders      OrderRepository
	Stock       StockRepository
	Outbox      OutboxRepository
	// The challenge verification flow's aggregates.
	Challenges     ChallengeRepository
	UploadSessions UploadSessionRepository
	Verifications  VerificationRepository
	// The waiting room's aggregates.
	Events       EventRepository
	Seats        SeatRepository
	Reservations ReservationRepository
}

// Coordination is what the instances of one deployment share: the distributed lock, the
// idempotency records and the waiting rooms.
type Coordination struct {
	Locker      Locker
	Idempotency IdempotencyStore
	// WaitingRoom is the events' queues and entry tokens (SPEC §3).
	WaitingRoom WaitingRoom
	// PushQueue is the push admission mode's view of the same rooms: connections, promotion
	// and the entry and dispatch streams (SPEC §3 push).
	PushQueue PushQueue
}
