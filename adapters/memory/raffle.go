package memory

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rushgate/rushgate/domain/raffle"
	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.RaffleRepository      = (*RaffleRepository)(nil)
	_ ports.RaffleEntryRepository = (*RaffleEntryRepository)(nil)
)

func raffleKeyOf(r raffle.Raffle) string { return r.ID() }

var rafflesTable = declareTable("raffles", raffleKeyOf)

// entryKey is the unique key (raffleId, userId) of an entry.
type entryKey struct {
	raffleID, userID string
}

func entryKeyOf(e raffle.Entry) entryKey { return entryKey{e.RaffleID, e.UserID} }

// raffle partitions the entries table by raffle, for Count and UserIDs.
func (k entryKey) raffle() string { return k.raffleID }

var entriesTable = declarePartitionedTable("raffle_entries", entryKeyOf, entryKey.raffle)

// RaffleRepository stores raffles in a Database.
type RaffleRepository struct {
	db *Database
}

// NewRaffleRepository returns a RaffleRepository on d.
func NewRaffleRepository(d *Database) *RaffleRepository { return &RaffleRepository{db: d} }

// Create inserts r; an existing id is a duplicate-key error.
func (r *RaffleRepository) Create(ctx context.Context, rf *raffle.Raffle) error {
	return r.db.run(ctx, func(t *tx) error { return rafflesTable.in(r.db).insert(ctx, t, *rf) })
}

// Get returns a copy of the raffle, or raffle.ErrNotFound.
func (r *RaffleRepository) Get(ctx context.Context, id string) (*raffle.Raffle, error) {
	var found raffle.Raffle
	err := r.db.run(ctx, func(t *tx) error {
		rf, ok := rafflesTable.in(r.db).get(t, id)
		if !ok {
			return raffle.ErrNotFound
		}
		found = rf
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &found, nil
}

// GetForDraw locks the raffle's row until the transaction ends and returns a copy, or
// raffle.ErrNotFound. It fails outside InTx.
func (r *RaffleRepository) GetForDraw(ctx context.Context, id string) (*raffle.Raffle, error) {
	var found raffle.Raffle
	err := r.db.runInTx(ctx, func(t *tx) error {
		rf, ok, err := rafflesTable.in(r.db).getForUpdate(ctx, t, id)
		if err != nil {
			return err
		}
		if !ok {
			return raffle.ErrNotFound
		}
		found = rf
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &found, nil
}

// SaveClosing writes the closing raffle over a stored OPEN one, under its row lock, or returns
// raffle.ErrNotDue.
func (r *RaffleRepository) SaveClosing(ctx context.Context, rf *raffle.Raffle) error {
	return r.saveOver(ctx, rf, raffle.StatusOpen)
}

// SaveDrawn writes the drawn raffle over a stored CLOSING one, under its row lock, or returns
// raffle.ErrNotDue.
func (r *RaffleRepository) SaveDrawn(ctx context.Context, rf *raffle.Raffle) error {
	return r.saveOver(ctx, rf, raffle.StatusClosing)
}

// saveOver writes rf if the stored raffle's status is over.
func (r *RaffleRepository) saveOver(ctx context.Context, rf *raffle.Raffle, over raffle.Status) error {
	return r.db.run(ctx, func(t *tx) error {
		stored, ok, err := rafflesTable.in(r.db).getForUpdate(ctx, t, rf.ID())
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("memory: save raffle %q: %w", rf.ID(), raffle.ErrNotFound)
		}
		if stored.Status() != over {
			return raffle.ErrNotDue
		}
		return rafflesTable.in(r.db).put(ctx, t, *rf)
	})
}

// Due returns up to limit OPEN raffles whose closesAt has come, earliest first.
func (r *RaffleRepository) Due(ctx context.Context, now time.Time, limit int) ([]string, error) {
	var ids []string
	err := r.db.run(ctx, func(t *tx) error {
		due := rafflesTable.in(r.db).filter(t, func(rf raffle.Raffle) bool { return rf.Due(now) })
		slices.SortFunc(due, func(a, b raffle.Raffle) int { return a.ClosesAt().Compare(b.ClosesAt()) })
		for _, rf := range due[:min(max(limit, 0), len(due))] {
			ids = append(ids, rf.ID())
		}
		return nil
	})
	return ids, err
}

// ForProduct returns copies of the raffles of productID.
func (r *RaffleRepository) ForProduct(ctx context.Context, productID string) ([]*raffle.Raffle, error) {
	var found []*raffle.Raffle
	err := r.db.run(ctx, func(t *tx) error {
		for _, rf := range rafflesTable.in(r.db).filter(t, func(rf raffle.Raffle) bool { return rf.ProductID() == productID }) {
			found = append(found, &rf)
		}
		return nil
	})
	return found, err
}

// RaffleEntryRepository stores raffle entries in a Database.
type RaffleEntryRepository struct {
	db *Database
}

// NewRaffleEntryRepository returns a RaffleEntryRepository on d.
func NewRaffleEntryRepository(d *Database) *RaffleEntryRepository {
	return &RaffleEntryRepository{db: d}
}

// AddWhileOpen stores an entry at at for each of userIDs who has none, in one statement under
// the raffle's row lock (memory has no share mode: entries of one raffle take turns, and a draw
// waits for them and they for it), only while the raffle takes entries at at. It returns the
// users it stored and the entries of the others who had one.
func (r *RaffleEntryRepository) AddWhileOpen(ctx context.Context, raffleID string, at time.Time, userIDs []string) ([]string, map[string]raffle.Entry, error) {
	var stored []string
	entered := map[string]raffle.Entry{}
	err := r.db.run(ctx, func(t *tx) error {
		rf, ok, err := rafflesTable.in(r.db).getForUpdate(ctx, t, raffleID)
		if err != nil || !ok || rf.CheckEntry(at) != nil {
			return err
		}
		var fresh []raffle.Entry
		for _, userID := range userIDs {
			e := raffle.Entry{RaffleID: raffleID, UserID: userID, EnteredAt: at}
			if had, ok := entriesTable.in(r.db).get(t, entryKeyOf(e)); ok {
				entered[userID] = had
				continue
			}
			if slices.Contains(stored, userID) {
				continue
			}
			fresh = append(fresh, e)
			stored = append(stored, userID)
		}
		return entriesTable.in(r.db).insert(ctx, t, fresh...)
	})
	if err != nil {
		return nil, nil, err
	}
	return stored, entered, nil
}

// Existing returns the entries of those of userIDs who entered the raffle.
func (r *RaffleEntryRepository) Existing(ctx context.Context, raffleID string, userIDs []string) (map[string]raffle.Entry, error) {
	existing := make(map[string]raffle.Entry)
	err := r.db.run(ctx, func(t *tx) error {
		for _, userID := range userIDs {
			if e, ok := entriesTable.in(r.db).get(t, entryKey{raffleID, userID}); ok {
				existing[userID] = e
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return existing, nil
}

// Get returns the user's entry, or raffle.ErrNotEntered.
func (r *RaffleEntryRepository) Get(ctx context.Context, raffleID, userID string) (raffle.Entry, error) {
	var found raffle.Entry
	err := r.db.run(ctx, func(t *tx) error {
		e, ok := entriesTable.in(r.db).get(t, entryKey{raffleID, userID})
		if !ok {
			return raffle.ErrNotEntered
		}
		found = e
		return nil
	})
	return found, err
}

// Count returns the number of the raffle's entries.
func (r *RaffleEntryRepository) Count(ctx context.Context, raffleID string) (int, error) {
	var n int
	err := r.db.run(ctx, func(t *tx) error {
		n = len(entriesTable.in(r.db).rowsIn(t, raffleID))
		return nil
	})
	return n, err
}

// UserIDs returns up to limit entrants of the raffle after the id after, in id order.
func (r *RaffleEntryRepository) UserIDs(ctx context.Context, raffleID, after string, limit int) ([]string, error) {
	var ids []string
	err := r.db.run(ctx, func(t *tx) error {
		for _, e := range entriesTable.in(r.db).rowsIn(t, raffleID) {
			if e.UserID > after {
				ids = append(ids, e.UserID)
			}
		}
		slices.Sort(ids)
		ids = ids[:min(max(limit, 0), len(ids))]
		return nil
	})
	return ids, err
}

// NewRaffleStores returns the raffle repositories on d.
func NewRaffleStores(d *Database) ports.RaffleStores {
	return ports.RaffleStores{Raffles: NewRaffleRepository(d), Entries: NewRaffleEntryRepository(d)}
}
