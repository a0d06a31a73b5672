package gormdb

import "github.com/rushgate/rushgate/ports"

// NewStores returns db's TxRunner, its idempotency markers and every flow's store set on it, so
// that a use case's writes through any of them share one transaction.
func NewStores(db *DB) ports.Stores {
	return ports.Stores{
		Tx:                 NewTxRunner(db),
		Markers:            NewIdempotencyMarkerRepository(db),
		CrewStores:         NewCrewStores(db),
		CommerceStores:     NewCommerceStores(db),
		VerificationStores: NewVerificationStores(db),
		WaitingStores:      NewWaitingStores(db),
	}
}
