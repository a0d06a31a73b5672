package ports

// Each flow's repositories come as one store set, built by every backend next to the
// repositories' code (memory.NewCrewStores, gormdb.NewCrewStores, …). A flow's writes through its
// set and the backend's TxRunner share one transaction, since every set of a backend is on one
// database.

// CrewStores are the crews and their members.
type CrewStores struct {
	Crews       CrewRepository
	CrewMembers CrewMemberRepository
}

// CommerceStores are the points, coupons, catalog, carts, orders and the outbox their payments
// write: payment touches all of them in one transaction.
type CommerceStores struct {
	Coupons     CouponRepository
	UserCoupons UserCouponRepository
	Wallets     WalletRepository
	Products    ProductRepository
	Carts       CartRepository
	Orders      OrderRepository
	Stock       StockRepository
	Outbox      OutboxRepository
}

// VerificationStores are the challenges, their upload sessions and verifications.
type VerificationStores struct {
	Challenges     ChallengeRepository
	UploadSessions UploadSessionRepository
	Verifications  VerificationRepository
}

// WaitingStores are the events, their seats and reservations.
type WaitingStores struct {
	Events       EventRepository
	Seats        SeatRepository
	Reservations ReservationRepository
}

// Stores is one backend's TxRunner, idempotency markers and every flow's store set, for tests
// and contract suites that run on all of them (memory.NewStores, gormdb.NewStores). The server
// wires each flow's set on its own.
type Stores struct {
	Tx      TxRunner
	Markers IdempotencyMarkerRepository
	CrewStores
	CommerceStores
	VerificationStores
	WaitingStores
}

// Coordination is what the instances of one deployment share: the distributed lock, the
// idempotency records and the waiting rooms.
type Coordination struct {
	Locker      Locker
	Idempotency IdempotencyStore
	// WaitingRoom is the events' queues and entry tokens.
	WaitingRoom WaitingRoom
	// PushQueue is the push admission mode's view of the same rooms: connections, promotion
	// and the entry and dispatch streams.
	PushQueue PushQueue
}
