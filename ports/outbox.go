package ports

import (
	"context"
	"time"

	"github.com/rushgate/rushgate/domain/outbox"
)

// OutboxClaim asks for due PENDING messages: those whose NextAttemptAt is at or before Now,
// oldest first (CreatedAt, then ID), at most Limit, or only the message ID when it is set.
// Claimed messages get NextAttemptAt = Until and the claim's Token, so no other claim takes them
// before Until: the claimer's lease.
type OutboxClaim struct {
	Token string
	Now   time.Time
	Until time.Time
	Limit int
	ID    string
}

// OutboxRepository stores the messages of the transactional outbox.
//
// Add inserts messages in ctx's transaction (or on its own outside one), all or none. Claim
// takes due PENDING messages as OutboxClaim says, atomically: of concurrent claims each message
// goes to at most one, and a claim never waits for another's rows (FOR UPDATE SKIP LOCKED).
// Record writes a claimed message's outcome (status, attempts, next attempt, last error, sent
// time) only while the claim's token still holds it, and reports whether it did. Get returns a
// message or outbox.ErrNotFound. List pages messages of one status (all when status is empty)
// in ID order (ids are time-ordered) after the cursor (the last ID of the previous page; "" for
// the first), and returns the next cursor, "" after the last page. Retry turns a FAILED message
// PENDING, due at now with its schedule restarted, in one conditional statement, or returns
// outbox.ErrNotFound or outbox.ErrNotFailed, changing nothing. Count returns how many messages
// are PENDING and how many FAILED (SENT ones, which only grow, are not counted).
type OutboxRepository interface {
	Add(ctx context.Context, messages ...outbox.Message) error
	Claim(ctx context.Context, c OutboxClaim) ([]outbox.Message, error)
	Record(ctx context.Context, m outbox.Message, token string) (bool, error)
	Get(ctx context.Context, id string) (outbox.Message, error)
	List(ctx context.Context, status outbox.Status, cursor string, limit int) ([]outbox.Message, string, error)
	Retry(ctx context.Context, id string, now time.Time) error
	Count(ctx context.Context) (map[outbox.Status]int, error)
}

// DataPlatform receives delivered messages. Send posts payload once, carrying messageID so the
// receiver can de-duplicate a redelivery; nil means the platform accepted it (any 2xx). It
// returns within the adapter's timeout.
type DataPlatform interface {
	Send(ctx context.Context, messageID string, payload []byte) error
}

// Alert is something an operator must look at: a summary and the facts behind it.
type Alert struct {
	Summary string
	Fields  map[string]string
}

// Notifier raises alerts (a log line, a webhook). Notify returns within the adapter's timeout;
// an error means the alert may not have reached anyone.
type Notifier interface {
	Notify(ctx context.Context, a Alert) error
}
