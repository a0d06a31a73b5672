package memory

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/rushgate/rushgate/domain/outbox"
	"github.com/rushgate/rushgate/ports"
)

var _ ports.OutboxRepository = (*OutboxRepository)(nil)

func outboxKeyOf(m outboxRow) string { return m.ID }

var outboxTable = declareTable("outbox", outboxKeyOf)

// outboxRow is a message with the token of the claim holding it.
type outboxRow struct {
	outbox.Message
	token string
}

// cloneMessage copies m's payload and sent time, so that neither the caller nor the store can
// change the other's.
func cloneMessage(m outbox.Message) outbox.Message {
	m.Payload = bytes.Clone(m.Payload)
	if m.SentAt != nil {
		at := *m.SentAt
		m.SentAt = &at
	}
	return m
}

func byCreation(a, b outbox.Message) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
}

// OutboxRepository stores outbox messages in a Database.
type OutboxRepository struct {
	db *Database
}

// NewOutboxRepository returns an OutboxRepository on d.
func NewOutboxRepository(d *Database) *OutboxRepository { return &OutboxRepository{db: d} }

// Add inserts the messages in one statement, all or none.
func (r *OutboxRepository) Add(ctx context.Context, messages ...outbox.Message) error {
	if len(messages) == 0 {
		return nil
	}
	rows := make([]outboxRow, len(messages))
	for i, m := range messages {
		rows[i] = outboxRow{Message: cloneMessage(m)}
	}
	return r.db.run(ctx, func(t *tx) error { return outboxTable.in(r.db).insert(ctx, t, rows...) })
}

// Claim scans for due PENDING messages oldest first, passing over rows another transaction has
// locked (SKIP LOCKED), and leases those it locks to the claim.
func (r *OutboxRepository) Claim(ctx context.Context, c ports.OutboxClaim) ([]outbox.Message, error) {
	var claimed []outbox.Message
	err := r.db.InTx(ctx, func(ctx context.Context) error {
		claimed = nil
		return r.db.run(ctx, func(t *tx) error {
			due := outboxTable.in(r.db).filter(t, func(row outboxRow) bool {
				return row.Status == outbox.Pending && !row.NextAttemptAt.After(c.Now) && (c.ID == "" || row.ID == c.ID)
			})
			slices.SortFunc(due, func(a, b outboxRow) int { return byCreation(a.Message, b.Message) })
			for _, row := range due {
				if len(claimed) == c.Limit {
					break
				}
				if !outboxTable.in(r.db).tryLock(t, row.ID) {
					continue
				}
				// Read again under the lock: a claim that committed meanwhile moved it on.
				row, ok := outboxTable.in(r.db).get(t, row.ID)
				if !ok || row.Status != outbox.Pending || row.NextAttemptAt.After(c.Now) {
					continue
				}
				row.NextAttemptAt, row.token = c.Until, c.Token
				if err := outboxTable.in(r.db).put(ctx, t, row); err != nil {
					return err
				}
				claimed = append(claimed, cloneMessage(row.Message))
			}
			return nil
		})
	})
	return claimed, err
}

// Record writes the message's outcome while the claim's token still holds it.
func (r *OutboxRepository) Record(ctx context.Context, m outbox.Message, token string) (bool, error) {
	recorded := false
	err := r.db.run(ctx, func(t *tx) error {
		row, ok, err := outboxTable.in(r.db).getForUpdate(ctx, t, m.ID)
		if err != nil || !ok || row.token != token || row.Status != outbox.Pending {
			return err
		}
		recorded = true
		return outboxTable.in(r.db).put(ctx, t, outboxRow{Message: cloneMessage(m), token: token})
	})
	return recorded, err
}

// Get returns a copy of the message, or outbox.ErrNotFound.
func (r *OutboxRepository) Get(ctx context.Context, id string) (outbox.Message, error) {
	var found outbox.Message
	err := r.db.run(ctx, func(t *tx) error {
		row, ok := outboxTable.in(r.db).get(t, id)
		if !ok {
			return outbox.ErrNotFound
		}
		found = cloneMessage(row.Message)
		return nil
	})
	return found, err
}

// List pages the messages of status (all when empty) in id order after the cursor.
func (r *OutboxRepository) List(ctx context.Context, status outbox.Status, cursor string, limit int) ([]outbox.Message, string, error) {
	var rows []outboxRow
	err := r.db.run(ctx, func(t *tx) error {
		rows = outboxTable.in(r.db).filter(t, func(row outboxRow) bool { return status == "" || row.Status == status })
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	messages := make([]outbox.Message, len(rows))
	for i, row := range rows {
		messages[i] = cloneMessage(row.Message)
	}
	slices.SortFunc(messages, func(a, b outbox.Message) int { return cmp.Compare(a.ID, b.ID) })
	after, _ := slices.BinarySearchFunc(messages, cursor, func(m outbox.Message, id string) int {
		if m.ID <= id {
			return -1
		}
		return 1
	})
	messages = messages[after:]
	if len(messages) <= limit {
		return messages, "", nil
	}
	return messages[:limit], messages[limit-1].ID, nil
}

// Retry turns a FAILED message PENDING under its row lock.
func (r *OutboxRepository) Retry(ctx context.Context, id string, now time.Time) error {
	return r.db.run(ctx, func(t *tx) error {
		row, ok, err := outboxTable.in(r.db).getForUpdate(ctx, t, id)
		if err != nil {
			return err
		}
		if !ok {
			return outbox.ErrNotFound
		}
		if err := row.Retry(now); err != nil {
			return err
		}
		row.token = ""
		return outboxTable.in(r.db).put(ctx, t, row)
	})
}

// Count counts the PENDING and FAILED messages.
func (r *OutboxRepository) Count(ctx context.Context) (map[outbox.Status]int, error) {
	counts := make(map[outbox.Status]int)
	err := r.db.run(ctx, func(t *tx) error {
		for _, row := range outboxTable.in(r.db).filter(t, func(row outboxRow) bool { return row.Status != outbox.Sent }) {
			counts[row.Status]++
		}
		return nil
	})
	return counts, err
}
