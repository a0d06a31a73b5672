package gormdb

import "github.com/rushgate/rushgate/ports"

// NewStores returns the TxRunner and every repository of db, so that a use case's writes
// through any of them share one transaction.
func NewStores(db *DB) ports.Stores {
	return ports.Stores{
		Tx:             NewTxRunner(db),
		Crews:          NewCrewRepository(db),
		CrewMembers:    NewCrewMemberRepository(db),
		Markers:        NewIdempotencyMarkerRepository(db),
		Coupons:        NewCouponRepository(db),
		UserCoupons:    NewUserCouponRepository(db),
		Wallets:        NewWalletRepository(db),
		Products:       NewProductRepository(db),
		Carts:          NewCartRepository(db),
		Orders:         NewOrderRepository(db),
		Stock:          NewStockRepository(db),
		Outbox:         NewOutboxRepository(db),
		Challenges:     NewChallengeRepository(db),
		UploadSessions: NewUploadSessionRepository(db),
		Verifications:  NewVerificationRepository(db),
		Events:         NewEventRepository(db),
		Seats:          NewSeatRepository(db),
		Reservations:   NewReservationRepository(db),
	}
}
