package testkit

import (
	"context"
	"errors"
	"fmt"

	"github.com/rushgate/rushgate/ports"
)

// CommitLostTx runs each transaction on Inner, committing it or not as Committed says, then
// answers as a runner whose connection was lost during the COMMIT does
// (ports.ErrCommitOutcomeUnknown): for a use case that must tell the two outcomes apart.
// Meanwhile, when set, runs once the transaction has ended, before the answer: what another
// client does in between.
type CommitLostTx struct {
	Inner     ports.TxRunner
	Committed bool
	Meanwhile func(ctx context.Context)
}

var errNotCommitted = errors.New("rolled back: the COMMIT never reached the database")

// InTx runs fn on Inner and answers ports.ErrCommitOutcomeUnknown once fn succeeded; fn's own
// error is answered as it is.
func (tx CommitLostTx) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	err := tx.Inner.InTx(ctx, func(ctx context.Context) error {
		if err := fn(ctx); err != nil {
			return err
		}
		if !tx.Committed {
			return errNotCommitted
		}
		return nil
	})
	if err != nil && !errors.Is(err, errNotCommitted) {
		return err
	}
	if tx.Meanwhile != nil {
		tx.Meanwhile(ctx)
	}
	return fmt.Errorf("commit: connection lost: %w", ports.ErrCommitOutcomeUnknown)
}
