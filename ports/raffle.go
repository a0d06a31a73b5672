package ports

import (
	"context"
	"time"

	"github.com/rushgate/rushgate/domain/raffle"
)

// RaffleStores are the raffles and their entries.
type RaffleStores struct {
	Raffles RaffleRepository
	Entries RaffleEntryRepository
}

// RaffleRepository stores raffles, their secret seeds and their draws' results.
//
// Create inserts a raffle with its seed; Get returns it, or raffle.ErrNotFound. The stored seed
// is the one Create was given, whatever restarts or instances read it later.
//
// GetForEntry and GetForDraw must run inside TxRunner.InTx and return the raffle or
// raffle.ErrNotFound. GetForEntry locks the raffle's row in share mode (an implementation may
// lock it exclusively) until the transaction ends, so entries run side by side; GetForDraw locks
// it exclusively, so it waits for every entry transaction holding it and entries wait for it.
//
// SaveClosing writes status CLOSING only over a stored OPEN raffle, SaveDrawn a drawn raffle's
// status and result only over a stored CLOSING one; each returns raffle.ErrNotDue, writing
// nothing, when the stored status is not the one it writes over: of two draws of one raffle one
// writes. A close committed under GetForDraw's lock thus fixes the raffle's entries. Due returns
// the ids of up to limit raffles to draw at now (OPEN with closesAt at or before now, or
// CLOSING), earliest closesAt first. ForProduct returns the raffles whose productId is productID.
type RaffleRepository interface {
	Create(ctx context.Context, r *raffle.Raffle) error
	Get(ctx context.Context, id string) (*raffle.Raffle, error)
	GetForEntry(ctx context.Context, id string) (*raffle.Raffle, error)
	GetForDraw(ctx context.Context, id string) (*raffle.Raffle, error)
	SaveClosing(ctx context.Context, r *raffle.Raffle) error
	SaveDrawn(ctx context.Context, r *raffle.Raffle) error
	Due(ctx context.Context, now time.Time, limit int) ([]string, error)
	ForProduct(ctx context.Context, productID string) ([]*raffle.Raffle, error)
}

// RaffleEntryRepository stores entries, UNIQUE (raffleId, userId).
//
// Add inserts entries in one statement, all or none: when any pair exists, including one a
// concurrent transaction inserted first, it inserts none and returns raffle.ErrAlreadyEntered;
// an entry of an unknown raffle is raffle.ErrNotFound. Existing returns the entries of those of
// userIDs who entered the raffle, in one read, by user id. Get returns the user's entry or
// raffle.ErrNotEntered. Count returns the number of a raffle's entries. UserIDs returns up to
// limit of a raffle's entrants in user id order (byte-wise), after the id after ("" for the
// first page), so that a raffle of any size is read in bounded statements.
type RaffleEntryRepository interface {
	Add(ctx context.Context, entries ...raffle.Entry) error
	Existing(ctx context.Context, raffleID string, userIDs []string) (map[string]raffle.Entry, error)
	Get(ctx context.Context, raffleID, userID string) (raffle.Entry, error)
	Count(ctx context.Context, raffleID string) (int, error)
	UserIDs(ctx context.Context, raffleID, after string, limit int) ([]string, error)
}
