package gormdb

import (
	"context"
	"database/sql"
	"time"

	"github.com/rushgate/rushgate/domain/outbox"
	"github.com/rushgate/rushgate/ports"
)

var _ ports.OutboxRepository = (*OutboxRepository)(nil)

// outboxColumns are a message's columns in the order scanMessage reads them.
const outboxColumns = "id, payload, status, attempts, next_attempt_at, last_error, created_at, sent_at, origin"

// OutboxRepository stores the outbox table; it implements ports.OutboxRepository.
type OutboxRepository struct {
	db *DB
	tx *TxRunner
	// Hand-written statements (see statement.go), bound to db's dialect once.
	insertSQL, claimSQL, claimOneSQL, recordSQL, getSQL, retrySQL, countSQL string
}

// NewOutboxRepository returns the outbox repository of db.
func NewOutboxRepository(db *DB) *OutboxRepository {
	const due = " WHERE status = 'PENDING' AND next_attempt_at <= ? "
	// The claim walks outbox_claim in its order and stops at the rows it takes; MySQL is held to
	// it, since sorting through another index would lock every due row (see the migration).
	claimFrom := "SELECT " + outboxColumns + " FROM outbox"
	if db.dialect == MySQL {
		claimFrom += " FORCE INDEX (outbox_claim)"
	}
	return &OutboxRepository{
		db:          db,
		tx:          NewTxRunner(db),
		insertSQL:   "INSERT INTO outbox (" + outboxColumns + ") VALUES ",
		claimSQL:    Bind(db.dialect, claimFrom+due+"ORDER BY created_at, id LIMIT ? FOR UPDATE SKIP LOCKED"),
		claimOneSQL: Bind(db.dialect, "SELECT "+outboxColumns+" FROM outbox"+due+"AND id = ? FOR UPDATE SKIP LOCKED"),
		recordSQL: Bind(db.dialect, "UPDATE outbox SET status = ?, attempts = ?, next_attempt_at = ?, last_error = ?, sent_at = ? "+
			"WHERE id = ? AND claim_token = ? AND status = 'PENDING'"),
		getSQL: Bind(db.dialect, "SELECT "+outboxColumns+" FROM outbox WHERE id = ?"),
		retrySQL: Bind(db.dialect, "UPDATE outbox SET status = 'PENDING', attempts = 0, next_attempt_at = ?, claim_token = '' "+
			"WHERE id = ? AND status = 'FAILED'"),
		countSQL: "SELECT status, COUNT(*) FROM outbox WHERE status IN ('PENDING', 'FAILED') GROUP BY status",
	}
}

// scanMessage reads one row of outboxColumns.
func scanMessage(rows *sql.Rows) (outbox.Message, error) {
	var (
		m      outbox.Message
		status string
		sentAt sql.NullTime
		origin sql.NullString
	)
	if err := rows.Scan(&m.ID, &m.Payload, &status, &m.Attempts, &m.NextAttemptAt, &m.LastError, &m.CreatedAt, &sentAt,
		&origin); err != nil {
		return outbox.Message{}, err
	}
	m.Origin = origin.String
	m.Status, m.NextAttemptAt, m.CreatedAt = outbox.Status(status), m.NextAttemptAt.UTC(), m.CreatedAt.UTC()
	if sentAt.Valid {
		at := sentAt.Time.UTC()
		m.SentAt = &at
	}
	return m, nil
}

func nullTime(t *time.Time) sql.NullTime {
	if t == nil {
		return sql.NullTime{}
	}
	return sql.NullTime{Time: t.UTC(), Valid: true}
}

// Add inserts the messages in one multi-row INSERT. A call carries at most 7,281 messages.
func (r *OutboxRepository) Add(ctx context.Context, messages ...outbox.Message) error {
	if len(messages) == 0 {
		return nil
	}
	const columns = 9
	args := make([]any, 0, columns*len(messages))
	for _, m := range messages {
		args = append(args, m.ID, string(m.Payload), string(m.Status), m.Attempts, m.NextAttemptAt.UTC(), m.LastError,
			m.CreatedAt.UTC(), nullTime(m.SentAt), sql.NullString{String: m.Origin, Valid: m.Origin != ""})
	}
	_, err := r.db.exec(ctx, errorMeanings{op: "add outbox messages"}, Bind(r.db.dialect, r.insertSQL+tuples(len(messages), columns)), args...)
	return err
}

// Claim selects due rows with FOR UPDATE SKIP LOCKED, so concurrent claims pass over each
// other's rows instead of waiting, and leases them with one UPDATE, in one claim transaction.
func (r *OutboxRepository) Claim(ctx context.Context, c ports.OutboxClaim) ([]outbox.Message, error) {
	var claimed []outbox.Message
	err := r.inClaimTx(ctx, func(ctx context.Context) error {
		claimed = claimed[:0]
		query, args := r.claimSQL, []any{c.Now.UTC(), c.Limit}
		if c.ID != "" {
			query, args = r.claimOneSQL, []any{c.Now.UTC(), c.ID}
		}
		err := r.db.query(ctx, errorMeanings{op: "claim outbox messages"}, query, args, func(rows *sql.Rows) error {
			m, err := scanMessage(rows)
			m.NextAttemptAt = c.Until
			claimed = append(claimed, m)
			return err
		})
		if err != nil || len(claimed) == 0 {
			return err
		}
		lease := Bind(r.db.dialect, "UPDATE outbox SET next_attempt_at = ?, claim_token = ? WHERE id IN "+tuples(1, len(claimed)))
		args = []any{c.Until.UTC(), c.Token}
		for _, m := range claimed {
			args = append(args, m.ID)
		}
		_, err = r.db.exec(ctx, errorMeanings{op: "lease outbox messages"}, lease, args...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return claimed, nil
}

// inClaimTx runs fn in a transaction at READ COMMITTED, which takes no gap locks, so new
// messages never wait for a claim; a context already carrying a transaction joins it as it is.
func (r *OutboxRepository) inClaimTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return r.tx.inTx(ctx, readCommitted, fn)
}

// Record writes the outcome in one UPDATE conditional on the claim's token.
func (r *OutboxRepository) Record(ctx context.Context, m outbox.Message, token string) (bool, error) {
	updated, err := r.db.exec(ctx, errorMeanings{op: "record outbox outcome"}, r.recordSQL, string(m.Status), m.Attempts,
		m.NextAttemptAt.UTC(), m.LastError, nullTime(m.SentAt), m.ID, token)
	return updated == 1, err
}

// Get reads one message, or outbox.ErrNotFound.
func (r *OutboxRepository) Get(ctx context.Context, id string) (outbox.Message, error) {
	var (
		found outbox.Message
		ok    bool
	)
	err := r.db.query(ctx, errorMeanings{op: "get outbox message"}, r.getSQL, []any{id}, func(rows *sql.Rows) error {
		var err error
		found, err = scanMessage(rows)
		ok = true
		return err
	})
	if err == nil && !ok {
		err = outbox.ErrNotFound
	}
	return found, err
}

// List pages by id on the primary key, or on outbox_by_status for one status; it reads one row
// more than limit to know whether a next page exists.
func (r *OutboxRepository) List(ctx context.Context, status outbox.Status, cursor string, limit int) ([]outbox.Message, string, error) {
	query, args := "SELECT "+outboxColumns+" FROM outbox WHERE id > ?", []any{cursor}
	if status != "" {
		query, args = query+" AND status = ?", append(args, string(status))
	}
	query, args = Bind(r.db.dialect, query+" ORDER BY id LIMIT ?"), append(args, limit+1)
	var page []outbox.Message
	err := r.db.query(ctx, errorMeanings{op: "list outbox messages"}, query, args, func(rows *sql.Rows) error {
		m, err := scanMessage(rows)
		page = append(page, m)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	if len(page) <= limit {
		return page, "", nil
	}
	return page[:limit], page[limit-1].ID, nil
}

// Retry is one conditional UPDATE; when it updates nothing, a read tells an unknown message from
// one that is not FAILED; both within one TxTimeout.
func (r *OutboxRepository) Retry(ctx context.Context, id string, now time.Time) error {
	ctx, cancel := r.db.bounded(ctx)
	defer cancel()
	updated, err := r.db.exec(ctx, errorMeanings{op: "retry outbox message"}, r.retrySQL, now.UTC(), id)
	if err != nil || updated == 1 {
		return err
	}
	if _, err := r.Get(ctx, id); err != nil {
		return err
	}
	return outbox.ErrNotFailed
}

// Count groups the PENDING and FAILED messages by status on outbox_by_status; SENT ones, which
// only grow, are not counted.
func (r *OutboxRepository) Count(ctx context.Context) (map[outbox.Status]int, error) {
	counts := make(map[outbox.Status]int)
	err := r.db.query(ctx, errorMeanings{op: "count outbox messages"}, r.countSQL, nil, func(rows *sql.Rows) error {
		var (
			status string
			n      int
		)
		if err := rows.Scan(&status, &n); err != nil {
			return err
		}
		counts[outbox.Status(status)] = n
		return nil
	})
	return counts, err
}
