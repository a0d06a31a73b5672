package porttest

import (
	"context"
	"errors"
	"testing"

	"github.com/rushgate/rushgate/domain/commerce/wallet"
	"github.com/rushgate/rushgate/ports"
)

// errRollback is a failure a case returns to roll its transaction back.
var errRollback = errors.New("porttest: roll back")

// chargeMax is the maximum single charge the wallet cases use.
const chargeMax = 10_000_000

// TestWalletRepository checks ports.WalletRepository: Create stores the account and its opening
// entry (an existing id is wallet.ErrUserExists and changes nothing) and fails outside a
// transaction, as Apply and GetForUpdate do; Get of an unknown user is wallet.ErrUserNotFound;
// Apply writes the balance with its entries and a failed transaction keeps neither;
// concurrent charges under GetForUpdate serialise, so none is lost and Totals equals the
// balance.
func TestWalletRepository(t *testing.T, newStores func(t *testing.T) ports.Stores, caps Capabilities) {
	run(t, newStores, caps, []testCase[ports.Stores]{
		{"CreateThenGetRoundTripsWithOpeningEntry", testWalletCreateThenGet},
		{"CreateOfExistingUserIsUserExists", testWalletCreateExisting},
		{"UnknownUserIsNotFound", testWalletUnknownUser},
		{"LockingAndWritingOutsideTxFail", testWalletOutsideTx},
		{"ApplyWritesBalanceAndEntries", testWalletApply},
		{"RolledBackApplyKeepsNothing", testWalletRolledBackApply},
		{"ConcurrentChargesUnderGetForUpdateAllCount", testWalletConcurrentCharges},
	})
}

// createAccount stores a new account with a random id and the given opening balance.
func createAccount(t *testing.T, s ports.Stores, balance int64) *wallet.Account {
	t.Helper()
	a, opening, err := wallet.Open(newUserID(), balance, randomID(), now())
	must(t, err, "open account")
	must(t, s.Tx.InTx(context.Background(), func(ctx context.Context) error {
		return s.Wallets.Create(ctx, a, opening)
	}), "create account")
	return a
}

// expectTotals checks the stored balance and the ledger's sum and length.
func expectTotals(t *testing.T, s ports.Stores, userID string, balance int64, entries int) {
	t.Helper()
	a, err := s.Wallets.Get(context.Background(), userID)
	must(t, err, "get account")
	sum, n, err := s.Wallets.Totals(context.Background(), userID)
	must(t, err, "totals")
	expectEqual(t, a.Balance(), balance, "balance")
	expectEqual(t, sum, balance, "ledger sum")
	expectEqual(t, n, entries, "ledger entries")
}

// chargeInTx is the charge use case's transaction: lock the account, charge, store both.
func chargeInTx(ctx context.Context, s ports.Stores, userID string, amount int64) error {
	return s.Tx.InTx(ctx, func(ctx context.Context) error {
		a, err := s.Wallets.GetForUpdate(ctx, userID)
		if err != nil {
			return err
		}
		entry, err := a.Charge(amount, chargeMax, randomID(), "contract", now())
		if err != nil {
			return err
		}
		return s.Wallets.Apply(ctx, a, entry)
	})
}

func testWalletCreateThenGet(t *testing.T, e env[ports.Stores]) {
	a := createAccount(t, e.impl, 1500)
	got, err := e.impl.Wallets.Get(context.Background(), a.UserID())
	must(t, err, "get")
	expectEqual(t, *got, *a, "stored account")
	expectTotals(t, e.impl, a.UserID(), 1500, 1)
}

func testWalletCreateExisting(t *testing.T, e env[ports.Stores]) {
	a := createAccount(t, e.impl, 100)
	again, opening, err := wallet.Open(a.UserID(), 999, randomID(), now())
	must(t, err, "open")
	err = e.impl.Tx.InTx(context.Background(), func(ctx context.Context) error {
		return e.impl.Wallets.Create(ctx, again, opening)
	})
	expectIs(t, err, wallet.ErrUserExists, "create twice")
	expectTotals(t, e.impl, a.UserID(), 100, 1)
}

func testWalletUnknownUser(t *testing.T, e env[ports.Stores]) {
	_, err := e.impl.Wallets.Get(context.Background(), newUserID())
	expectIs(t, err, wallet.ErrUserNotFound, "get unknown")
	expectIs(t, chargeInTx(context.Background(), e.impl, newUserID(), 1), wallet.ErrUserNotFound, "charge unknown")
	sum, n, err := e.impl.Wallets.Totals(context.Background(), newUserID())
	must(t, err, "totals of unknown")
	expectEqual(t, sum, 0, "sum of unknown")
	expectEqual(t, n, 0, "entries of unknown")
}

func testWalletOutsideTx(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	a := createAccount(t, e.impl, 10)
	if _, err := e.impl.Wallets.GetForUpdate(ctx, a.UserID()); err == nil {
		t.Error("GetForUpdate outside a transaction succeeded")
	}
	entry, err := a.Charge(5, chargeMax, randomID(), "outside", now())
	must(t, err, "charge")
	if err := e.impl.Wallets.Apply(ctx, a, entry); err == nil {
		t.Error("Apply outside a transaction succeeded")
	}
	b, opening, err := wallet.Open(newUserID(), 1, randomID(), now())
	must(t, err, "open")
	if err := e.impl.Wallets.Create(ctx, b, opening); err == nil {
		t.Error("Create outside a transaction succeeded")
	}
	expectTotals(t, e.impl, a.UserID(), 10, 1)
}

func testWalletApply(t *testing.T, e env[ports.Stores]) {
	a := createAccount(t, e.impl, 0)
	must(t, e.impl.Tx.InTx(context.Background(), func(ctx context.Context) error {
		locked, err := e.impl.Wallets.GetForUpdate(ctx, a.UserID())
		if err != nil {
			return err
		}
		first, err := locked.Charge(300, chargeMax, randomID(), "one", now())
		if err != nil {
			return err
		}
		second, err := locked.Charge(700, chargeMax, randomID(), "two", now())
		if err != nil {
			return err
		}
		return e.impl.Wallets.Apply(ctx, locked, first, second)
	}), "charge twice in one transaction")
	expectTotals(t, e.impl, a.UserID(), 1000, 3)
}

func testWalletRolledBackApply(t *testing.T, e env[ports.Stores]) {
	a := createAccount(t, e.impl, 50)
	err := e.impl.Tx.InTx(context.Background(), func(ctx context.Context) error {
		if err := chargeInTx(ctx, e.impl, a.UserID(), 25); err != nil {
			return err
		}
		return errRollback
	})
	expectIs(t, err, errRollback, "rolled back charge")
	expectTotals(t, e.impl, a.UserID(), 50, 1)
}

func testWalletConcurrentCharges(t *testing.T, e env[ports.Stores]) {
	a := createAccount(t, e.impl, 0)
	const charges = 20
	errs := startTogether(charges, func(int) error {
		return chargeInTx(context.Background(), e.impl, a.UserID(), 10)
	})
	for _, err := range errs {
		must(t, err, "charge")
	}
	expectTotals(t, e.impl, a.UserID(), 10*charges, charges+1)
}
