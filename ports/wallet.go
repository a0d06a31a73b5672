package ports

import (
	"context"

	"github.com/rushgate/rushgate/domain/commerce/wallet"
)

// WalletRepository stores users' points accounts and their ledger, together: no method changes
// a balance without appending the entries that explain the change, so Σ ledger == balance.
//
// Create inserts the account and its opening entry, both or neither (it must run inside
// TxRunner.InTx); an existing user id is wallet.ErrUserExists. Get returns wallet.ErrUserNotFound
// for an unknown user. GetForUpdate does the same but must run inside TxRunner.InTx and locks the
// account's row until that transaction ends: concurrent GetForUpdate callers on one user run one
// after another, each seeing the previous one's committed balance. Apply writes the account's
// balance and appends entries in ctx's transaction (it must run inside TxRunner.InTx); the
// entries are those the account's methods returned since it was read. Totals returns the sum of
// the user's ledger amounts and the number of entries, for reconciliation.
type WalletRepository interface {
	Create(ctx context.Context, a *wallet.Account, opening wallet.Entry) error
	Get(ctx context.Context, userID string) (*wallet.Account, error)
	GetForUpdate(ctx context.Context, userID string) (*wallet.Account, error)
	Apply(ctx context.Context, a *wallet.Account, entries ...wallet.Entry) error
	Totals(ctx context.Context, userID string) (sum int64, entries int, err error)
}
