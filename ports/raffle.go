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
// GetForDraw must run inside TxRunner.InTx and returns the raffle or raffle.ErrNotFound. It
// locks the raffle's row exclusively until the transaction ends, so it waits for every entry
// statement holding the row in share mode (RaffleEntryRepository.AddWhileOpen), and those wait
// for it.
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
	GetForDraw(ctx context.Context, id string) (*raffle.Raffle, error)
	SaveClosing(ctx context.Context, r *raffle.Raffle) error
	SaveDrawn(ctx context.Context, r *raffle.Raffle) error
	Due(ctx context.Context, now time.Time, limit int) ([]string, error)
	ForProduct(ctx context.Context, productID string) ([]*raffle.Raffle, error)
}

// RaffleEntryRepository stores entries, UNIQUE (raffleId, userId).
//
// AddWhileOpen stores an entry entered at `at` for each of userIDs who has none in the raffle,
// in one statement that reads the raffle's row in share mode and stores nothing unless the
// raffle is OPEN with closesAt after at: a close committed under GetForDraw's lock thus fixes
// the entries, and an entry statement that waited for that lock finds the raffle closed. It
// returns the users it stored, none for an unknown or closed raffle; a user with an entry,
// including one a concurrent statement stored first, is left as it is. It also returns the
// entries it read of such users, by user id: one that must read them to store the rest returns
// them, so that its caller need not read them again; it may leave any out. Existing returns
// the entries of those of userIDs who entered the raffle, in one read, by user id. Get returns the
// user's entry or raffle.ErrNotEntered. Count returns the number of a raffle's entries. UserIDs
// returns up to limit of a raffle's entrants in user id order (byte-wise), after the id after
// ("" for the first page), so that a raffle of any size is read in bounded statements.
type RaffleEntryRepository interface {
	AddWhileOpen(ctx context.Context, raffleID string, at time.Time, userIDs []string) (stored []string,
		entered map[string]raffle.Entry, err error)
	Existing(ctx context.Context, raffleID string, userIDs []string) (map[string]raffle.Entry, error)
	Get(ctx context.Context, raffleID, userID string) (raffle.Entry, error)
	Count(ctx context.Context, raffleID string) (int, error)
	UserIDs(ctx context.Context, raffleID, after string, limit int) ([]string, error)
}
