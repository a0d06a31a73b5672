// Package ports declares the driven ports the application depends on. Each interface's doc
// comment is the contract an implementation must honour; test/contract checks those sentences
// against every adapter.
package ports

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrUnavailable wraps a failure to reach a dependency (database, Redis, storage) or a dependency
// that did not answer within its timeout. The edge answers 503 with Retry-After.
var ErrUnavailable = errors.New("dependency unavailable")

// ErrCommitOutcomeUnknown means a transaction's connection was lost once its COMMIT may have
// reached the database: it may have committed or not, and it was not run again. It wraps
// ErrUnavailable, so a caller that cannot tell which answers 503; one that can read whether
// the transaction's writes are there may answer by what it finds.
var ErrCommitOutcomeUnknown = fmt.Errorf("transaction outcome unknown: %w", ErrUnavailable)

// ErrVersionConflict means an optimistic write found the row changed since it was read (its
// version moved on, or its condition no longer holds) and wrote nothing.
var ErrVersionConflict = errors.New("optimistic write conflict")

// TxRunner runs fn in one database transaction carried in the context it passes to fn.
// Repositories called with that context take part in the transaction. fn returning an error
// rolls everything back and InTx returns that error unchanged; nil commits, and a failed commit
// is returned. Row locks taken inside (GetForUpdate) are held until InTx returns. Calling InTx
// with a context that already carries a transaction joins it rather than nesting. An
// implementation may run fn again in a fresh transaction after a deadlock or serialization
// failure, so fn must have no effects outside the transaction. A commit whose outcome the
// implementation cannot know (its connection lost during the COMMIT) is ErrCommitOutcomeUnknown.
type TxRunner interface {
	InTx(ctx context.Context, fn func(ctx context.Context) error) error
}

// Clock tells the time. Implementations return UTC truncated to microseconds, the precision
// both databases store, so a value read back equals the value written.
type Clock interface {
	Now() time.Time
}

// Sleeper waits for d or until ctx is done, whichever comes first, returning ctx.Err() in the
// latter case.
type Sleeper interface {
	Sleep(ctx context.Context, d time.Duration) error
}

// IDGenerator returns a new globally unique, time-ordered identifier (a UUIDv7 string) per call.
type IDGenerator interface {
	NewID() string
}
