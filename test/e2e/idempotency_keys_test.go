package e2e

import (
	"context"
	"testing"

	"github.com/rushgate/rushgate/adapters/memory/memorytest"
	"github.com/rushgate/rushgate/adapters/system"
	appwallet "github.com/rushgate/rushgate/application/wallet"
)

// TestCharge_KeysDifferingInTrailingSpacesAreTwoCharges: an Idempotency-Key is printable ASCII,
// space included, so "abc " is another key than "abc" on every database. On MySQL's PAD SPACE
// collation they were one marker's key: the second charge found no marker of its own, failed to
// save one, and answered IDEMPOTENCY_IN_PROGRESS on every try for an hour. (An HTTP server trims
// a header value's trailing spaces; an embedding service passes the key as it is.)
func TestCharge_KeysDifferingInTrailingSpacesAreTwoCharges(t *testing.T) {
	for _, storage := range storages {
		t.Run(storage.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			stores := storage.open(t)
			env := memorytest.New(memorytest.WithStores(stores), memorytest.WithClock(system.Clock{}, system.Sleeper{}))
			wallets := appwallet.NewService(appwallet.Deps{Tx: stores.Tx, Wallets: stores.Wallets, Guard: env.Guard,
				Clock: env.Clock, IDs: system.UUIDs{}}, appwallet.Config{})
			if _, err := wallets.CreateUser(ctx, appwallet.CreateUserCommand{ID: "spaced", Balance: 0}); err != nil {
				t.Fatal(err)
			}

			for i, key := range []string{"abc", "abc "} {
				res, err := wallets.Charge(ctx, appwallet.ChargeCommand{UserID: "spaced", Amount: 100, IdempotencyKey: key})
				if err != nil || res.Replayed || res.Value.Balance != int64(100*(i+1)) {
					t.Fatalf("charge with key %q: %+v, %v", key, res, err)
				}
			}
		})
	}
}
