package wallet_test

import (
	"errors"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce"
	"github.com/rushgate/rushgate/domain/commerce/wallet"
)

var now = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

func TestOpen_RecordsTheOpeningBalanceAsTheFirstEntry(t *testing.T) {
	a, opening, err := wallet.Open("alice", 700, "e1", now)
	if err != nil {
		t.Fatal(err)
	}
	want := wallet.Entry{ID: "e1", UserID: "alice", Kind: wallet.Opening, Amount: 700, BalanceAfter: 700, Reference: "admin", CreatedAt: now}
	if a.Balance() != 700 || opening != want {
		t.Fatalf("balance %d, opening %+v", a.Balance(), opening)
	}
	for _, balance := range []int64{-1, commerce.MaxAmount + 1} {
		if _, _, err := wallet.Open("alice", balance, "e", now); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("balance %d: %v", balance, err)
		}
	}
}

func TestCharge_ReturnsTheEntryOrRefusesAndChangesNothing(t *testing.T) {
	a := wallet.Rebuild("alice", commerce.MaxAmount-5, now, now)
	for _, tc := range []struct {
		amount int64
		want   error
	}{
		{0, wallet.ErrInvalidAmount},
		{-1, wallet.ErrInvalidAmount},
		{11, wallet.ErrInvalidAmount}, // above the maximum charge
		{6, commerce.ErrAmountOverflow},
	} {
		if _, err := a.Charge(tc.amount, 10, "e", "r", now); !errors.Is(err, tc.want) {
			t.Errorf("charge %d: %v, want %v", tc.amount, err, tc.want)
		}
	}
	if a.Balance() != commerce.MaxAmount-5 {
		t.Fatalf("refused charges changed the balance to %d", a.Balance())
	}
	later := now.Add(time.Minute)
	entry, err := a.Charge(5, 10, "e2", "charge:k", later)
	want := wallet.Entry{ID: "e2", UserID: "alice", Kind: wallet.Charge, Amount: 5, BalanceAfter: commerce.MaxAmount, Reference: "charge:k", CreatedAt: later}
	if err != nil || entry != want || a.Balance() != commerce.MaxAmount || a.UpdatedAt() != later {
		t.Fatalf("charge: %+v, %v; balance %d", entry, err, a.Balance())
	}
}
