// Package wallet is a user's points: the balance an order is paid from, and the ledger that
// records every change of it, so that a balance always equals the sum of its ledger.
package wallet

import (
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce"
)

var (
	ErrUserNotFound  = domain.NewError(domain.KindNotFound, "USER_NOT_FOUND", "user not found")
	ErrUserExists    = domain.NewError(domain.KindConflict, "USER_EXISTS", "a user with this id already exists")
	ErrInvalidAmount = domain.NewError(domain.KindInvalid, "INVALID_AMOUNT", "the amount must be a positive integer within the maximum single charge")
)

// Kind names why a balance changed.
type Kind string

// Ledger entry kinds. An entry's Amount is signed: positive for Opening, Charge and Refund,
// negative for Payment.
const (
	Opening Kind = "OPENING" // the balance a user was created with
	Charge  Kind = "CHARGE"
	Payment Kind = "PAYMENT"
	Refund  Kind = "REFUND"
)

// Entry is one row of the ledger: a signed change of one user's balance, the balance after it,
// and what caused it (the idempotency key of a charge, the order of a payment).
type Entry struct {
	ID           string
	UserID       string
	Kind         Kind
	Amount       int64
	BalanceAfter int64
	Reference    string
	CreatedAt    time.Time
}

// Account is a user's points balance. Every change goes through a method that returns the
// ledger entry recording it; storing the balance without its entries is impossible through
// ports.WalletRepository.
type Account struct {
	userID    string
	balance   int64
	createdAt time.Time
	updatedAt time.Time
}

// Open validates and creates a user's account with an opening balance in [0, MaxAmount], and
// the ledger entry of that balance.
func Open(userID string, balance int64, entryID string, now time.Time) (*Account, Entry, error) {
	if err := domain.ValidateUserID("id", userID); err != nil {
		return nil, Entry{}, err
	}
	if balance < 0 || balance > commerce.MaxAmount {
		return nil, Entry{}, domain.Invalid("balance", "must be between 0 and %d", commerce.MaxAmount)
	}
	a := &Account{userID: userID, balance: balance, createdAt: now, updatedAt: now}
	return a, Entry{ID: entryID, UserID: userID, Kind: Opening, Amount: balance, BalanceAfter: balance,
		Reference: "admin", CreatedAt: now}, nil
}

// Rebuild restores an account from storage without re-validating; adapters only.
func Rebuild(userID string, balance int64, createdAt, updatedAt time.Time) *Account {
	return &Account{userID: userID, balance: balance, createdAt: createdAt, updatedAt: updatedAt}
}

func (a *Account) UserID() string       { return a.userID }
func (a *Account) Balance() int64       { return a.balance }
func (a *Account) CreatedAt() time.Time { return a.createdAt }
func (a *Account) UpdatedAt() time.Time { return a.updatedAt }

// CheckChargeAmount returns ErrInvalidAmount unless amount is in 1..maxCharge.
func CheckChargeAmount(amount, maxCharge int64) error {
	if amount < 1 || amount > maxCharge {
		return ErrInvalidAmount
	}
	return nil
}

// Charge adds amount (1..maxCharge, else ErrInvalidAmount) to the balance and returns the
// ledger entry. A balance that would exceed commerce.MaxAmount is refused with
// commerce.ErrAmountOverflow and the account is left unchanged.
func (a *Account) Charge(amount, maxCharge int64, entryID, reference string, now time.Time) (Entry, error) {
	if err := CheckChargeAmount(amount, maxCharge); err != nil {
		return Entry{}, err
	}
	balance, err := commerce.Add(a.balance, amount)
	if err != nil {
		return Entry{}, err
	}
	a.balance, a.updatedAt = balance, now
	return Entry{ID: entryID, UserID: a.userID, Kind: Charge, Amount: amount, BalanceAfter: balance,
		Reference: reference, CreatedAt: now}, nil
}

// CodeInsufficientBalance is the code of InsufficientBalance's error.
const CodeInsufficientBalance = "INSUFFICIENT_BALANCE"

// ErrInsufficientBalance matches every InsufficientBalance error with errors.Is.
var ErrInsufficientBalance = domain.NewError(domain.KindInvalid, CodeInsufficientBalance, "the balance does not cover the amount")

// InsufficientBalance refuses a payment of required with only current on the account, naming
// both so the client knows how much to charge.
func InsufficientBalance(current, required int64) error {
	return ErrInsufficientBalance.WithDetails(map[string]any{"currentBalance": current, "required": required})
}

// Pay takes amount (≥ 0) from the balance and returns the ledger entry (a negative amount), or
// InsufficientBalance and leaves the account unchanged.
func (a *Account) Pay(amount int64, entryID, reference string, now time.Time) (Entry, error) {
	if amount < 0 || amount > a.balance {
		return Entry{}, InsufficientBalance(a.balance, amount)
	}
	a.balance, a.updatedAt = a.balance-amount, now
	return Entry{ID: entryID, UserID: a.userID, Kind: Payment, Amount: -amount, BalanceAfter: a.balance,
		Reference: reference, CreatedAt: now}, nil
}
