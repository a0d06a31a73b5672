// Package wallet holds the points use cases: create a user with an opening balance, read a
// balance, and charge it (guarded). Every balance change writes its ledger entry in the same
// transaction, so a balance always equals the sum of its ledger. It depends on ports only.
package wallet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce/wallet"
	"github.com/rushgate/rushgate/ports"
)

// DefaultChargeMax is the largest single charge when Config.ChargeMax is zero.
const DefaultChargeMax int64 = 10_000_000

// Config tunes the wallet use cases.
type Config struct {
	// ChargeMax bounds a single charge; DefaultChargeMax when zero.
	ChargeMax int64
	// MaxBatch bounds how many charges of one user a lock hold applies in one transaction;
	// guard.DefaultMaxBatch when zero.
	MaxBatch int
}

// Deps are the ports and the guard the wallet use cases run on. The guard needs Deps.Tx and
// Deps.Markers: charges commit their idempotency markers with the balance.
type Deps struct {
	Tx      ports.TxRunner
	Wallets ports.WalletRepository
	Guard   *guard.Guard
	Clock   ports.Clock
	IDs     ports.IDGenerator
}

// Service runs the wallet use cases.
type Service struct {
	tx        ports.TxRunner
	wallets   ports.WalletRepository
	clock     ports.Clock
	ids       ports.IDGenerator
	chargeMax int64
	charges   *guard.Lane[chargeInput, ChargeResult]
}

// NewService wires the wallet use cases to their ports.
func NewService(d Deps, cfg Config) *Service {
	if cfg.ChargeMax <= 0 {
		cfg.ChargeMax = DefaultChargeMax
	}
	s := &Service{tx: d.Tx, wallets: d.Wallets, clock: d.Clock, ids: d.IDs, chargeMax: cfg.ChargeMax}
	s.charges = guard.NewLane(d.Guard, guard.LaneConfig{MaxBatch: cfg.MaxBatch, Markers: true}, s.chargeBatch)
	return s
}

// User is a user's id and points balance as clients see it.
type User struct {
	ID      string
	Balance int64
}

// CreateUserCommand creates a user with an opening balance.
type CreateUserCommand struct {
	ID      string
	Balance int64
}

// CreateUser stores a user with an opening balance in [0, commerce.MaxAmount] and the ledger
// entry of that balance, together. An existing id is wallet.ErrUserExists.
func (s *Service) CreateUser(ctx context.Context, cmd CreateUserCommand) (User, error) {
	a, opening, err := wallet.Open(cmd.ID, cmd.Balance, s.ids.NewID(), s.clock.Now())
	if err != nil {
		return User{}, err
	}
	if err := s.tx.InTx(ctx, func(ctx context.Context) error {
		return s.wallets.Create(ctx, a, opening)
	}); err != nil {
		return User{}, err
	}
	return User{ID: a.UserID(), Balance: a.Balance()}, nil
}

// Balance is a user's balance as clients see it.
type Balance struct {
	UserID  string
	Balance int64
}

// GetBalance returns the user's balance, or wallet.ErrUserNotFound. Who may read it is the
// edge's decision (the user or an admin).
func (s *Service) GetBalance(ctx context.Context, userID string) (Balance, error) {
	if err := domain.ValidateUserID("userId", userID); err != nil {
		return Balance{}, err
	}
	a, err := s.wallets.Get(ctx, userID)
	if err != nil {
		return Balance{}, err
	}
	return Balance{UserID: a.UserID(), Balance: a.Balance()}, nil
}

// ChargeCommand adds Amount to UserID's balance; the authenticated user must be UserID (the
// edge checks it) and IdempotencyKey is required.
type ChargeCommand struct {
	UserID         string
	Amount         int64
	IdempotencyKey string
}

// ChargeResult is the answer to a successful charge.
type ChargeResult struct {
	UserID        string
	Balance       int64
	ChargedAmount int64
	ChargedAt     time.Time
}

// chargeInput is one charge waiting in its user's lane.
type chargeInput struct {
	userID string
	amount int64
	key    string
}

// Charge adds the amount to the user's balance through the guard: amount check
// (wallet.ErrInvalidAmount), idempotency, then the lock balance:{userId}, whose holder applies
// every charge queued behind it in one transaction (chargeBatch) and commits each one's
// idempotency marker there, so a charge whose Complete was lost is answered from the database
// and never applied twice. Fails with wallet.ErrUserNotFound, or commerce.ErrAmountOverflow
// when the balance would exceed commerce.MaxAmount.
func (s *Service) Charge(ctx context.Context, cmd ChargeCommand) (guard.Result[ChargeResult], error) {
	if err := domain.ValidateUserID("userId", cmd.UserID); err != nil {
		return guard.Result[ChargeResult]{}, err
	}
	if err := wallet.CheckChargeAmount(cmd.Amount, s.chargeMax); err != nil {
		return guard.Result[ChargeResult]{}, err
	}
	req := guard.Request{
		UserID:         cmd.UserID,
		IdempotencyKey: cmd.IdempotencyKey,
		Fingerprint:    guard.Fingerprint("wallet.charge", []string{cmd.UserID}, strconv.AppendInt(nil, cmd.Amount, 10)),
		LockKey:        "balance:" + cmd.UserID,
		Outcome:        guard.OutcomeDone,
	}
	return s.charges.Run(ctx, req, chargeInput{userID: cmd.UserID, amount: cmd.Amount, key: cmd.IdempotencyKey})
}

// chargeBatch applies a batch of charges of one user in one transaction: the balance row FOR
// UPDATE, one UPDATE of the balance, one multi-row INSERT of their ledger entries (the guard adds
// their markers to the same transaction). Each charge gets its own answer, with the balance
// right after it; one that would overflow the balance is refused alone.
func (s *Service) chargeBatch(ctx context.Context, batch []chargeInput) ([]guard.Answer[ChargeResult], error) {
	userID := batch[0].userID
	answers := make([]guard.Answer[ChargeResult], len(batch))
	err := s.tx.InTx(ctx, func(ctx context.Context) error {
		clear(answers)
		a, err := s.wallets.GetForUpdate(ctx, userID)
		if errors.Is(err, wallet.ErrUserNotFound) {
			for i := range answers {
				answers[i].Err = wallet.ErrUserNotFound
			}
			return nil
		}
		if err != nil {
			return err
		}
		now := s.clock.Now()
		entries := make([]wallet.Entry, 0, len(batch))
		for i, in := range batch {
			entry, err := a.Charge(in.amount, s.chargeMax, s.ids.NewID(), "charge:"+in.key, now)
			if err != nil {
				answers[i].Err = err
				continue
			}
			entries = append(entries, entry)
			answers[i].Value = ChargeResult{UserID: userID, Balance: a.Balance(), ChargedAmount: in.amount, ChargedAt: now}
		}
		if len(entries) == 0 {
			return nil
		}
		if err := s.wallets.Apply(ctx, a, entries...); err != nil {
			return fmt.Errorf("apply charges: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return answers, nil
}
