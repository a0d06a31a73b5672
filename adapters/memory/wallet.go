package memory

import (
	"context"
	"errors"
	"fmt"

	"github.com/rushgate/rushgate/domain/commerce/wallet"
	"github.com/rushgate/rushgate/ports"
)

var _ ports.WalletRepository = (*WalletRepository)(nil)

func accountKeyOf(a wallet.Account) string { return a.UserID() }

var accountsTable = declareTable("users", accountKeyOf)

// ledgerKey is a ledger entry's primary key, with its user for partitioning.
type ledgerKey struct {
	userID, entryID string
}

func ledgerKeyOf(e wallet.Entry) ledgerKey { return ledgerKey{e.UserID, e.ID} }

var ledgerTable = declarePartitionedTable("balance_ledger", ledgerKeyOf, ledgerKey.user)

// user partitions the ledger by user, for Totals.
func (k ledgerKey) user() string { return k.userID }

// WalletRepository stores points accounts and their ledger in a Database.
type WalletRepository struct {
	db *Database
}

// NewWalletRepository returns a WalletRepository on d.
func NewWalletRepository(d *Database) *WalletRepository { return &WalletRepository{db: d} }

// Create inserts the account and its opening entry in ctx's transaction; an existing user is
// wallet.ErrUserExists. It fails outside InTx.
func (r *WalletRepository) Create(ctx context.Context, a *wallet.Account, opening wallet.Entry) error {
	return r.db.runInTx(ctx, func(t *tx) error {
		err := accountsTable.in(r.db).insert(ctx, t, *a)
		if errors.Is(err, errDuplicateKey) {
			return wallet.ErrUserExists
		}
		if err != nil {
			return err
		}
		return ledgerTable.in(r.db).insert(ctx, t, opening)
	})
}

// Get returns a copy of the account, or wallet.ErrUserNotFound.
func (r *WalletRepository) Get(ctx context.Context, userID string) (*wallet.Account, error) {
	var found wallet.Account
	err := r.db.run(ctx, func(t *tx) error {
		a, ok := accountsTable.in(r.db).get(t, userID)
		if !ok {
			return wallet.ErrUserNotFound
		}
		found = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &found, nil
}

// GetForUpdate locks the account's row until ctx's transaction ends, then returns a copy of it
// or wallet.ErrUserNotFound. It fails outside InTx.
func (r *WalletRepository) GetForUpdate(ctx context.Context, userID string) (*wallet.Account, error) {
	var found wallet.Account
	err := r.db.runInTx(ctx, func(t *tx) error {
		a, ok, err := accountsTable.in(r.db).getForUpdate(ctx, t, userID)
		if err != nil {
			return err
		}
		if !ok {
			return wallet.ErrUserNotFound
		}
		found = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &found, nil
}

// Apply writes the account's balance and appends entries in ctx's transaction. It fails
// outside InTx.
func (r *WalletRepository) Apply(ctx context.Context, a *wallet.Account, entries ...wallet.Entry) error {
	return r.db.runInTx(ctx, func(t *tx) error {
		if _, ok, err := accountsTable.in(r.db).getForUpdate(ctx, t, a.UserID()); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("memory: apply to account %q: %w", a.UserID(), wallet.ErrUserNotFound)
		}
		if err := accountsTable.in(r.db).put(ctx, t, *a); err != nil {
			return err
		}
		return ledgerTable.in(r.db).insert(ctx, t, entries...)
	})
}

// Totals sums the user's ledger.
func (r *WalletRepository) Totals(ctx context.Context, userID string) (int64, int, error) {
	var (
		sum int64
		n   int
	)
	err := r.db.run(ctx, func(t *tx) error {
		entries := ledgerTable.in(r.db).rowsIn(t, userID)
		for _, e := range entries {
			sum += e.Amount
		}
		n = len(entries)
		return nil
	})
	return sum, n, err
}
