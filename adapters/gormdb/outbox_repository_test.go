package gormdb_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/domain/outbox"
	"github.com/rushgate/rushgate/ports"
)

// addDueMessages stores n PENDING messages created a millisecond apart, due at start, oldest
// first, and returns them in that order.
func addDueMessages(t *testing.T, repo *gormdb.OutboxRepository, n int, start time.Time) []outbox.Message {
	t.Helper()
	messages := make([]outbox.Message, n)
	for i := range messages {
		messages[i] = outbox.New(uuid.NewString(), []byte(fmt.Sprintf(`{"n":%d}`, i)), start.Add(time.Duration(i)*time.Millisecond))
		messages[i].NextAttemptAt = start
	}
	require.NoError(t, repo.Add(context.Background(), messages...))
	return messages
}

func ids(messages []outbox.Message) []string {
	out := make([]string, len(messages))
	for i, m := range messages {
		out[i] = m.ID
	}
	return out
}

// TestOutboxClaim_LocksOnlyTheRowsItTakes holds one relay's claim open while others work. A
// claim that sorted every due row under FOR UPDATE would hold them all, and a second relay would
// find nothing to take; a claim that locked the gaps it read would make a payment's outbox row
// wait for it.
func TestOutboxClaim_LocksOnlyTheRowsItTakes(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := openMigrated(t, fresh, gormdb.Options{TxTimeout: 15 * time.Second})
			repo := gormdb.NewOutboxRepository(db)
			start := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
			messages := addDueMessages(t, repo, 30, start)
			now := start.Add(time.Minute)
			claim := func(ctx context.Context, token string, limit int) []outbox.Message {
				got, err := repo.Claim(ctx, ports.OutboxClaim{Token: token, Now: now, Until: now.Add(time.Hour), Limit: limit})
				require.NoError(t, err)
				return got
			}
			// The others must not wait for the open claim: they give up long before it ends.
			others, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()

			require.Equal(t, ids(messages[:10]), ids(claim(others, "relay-1", 10)), "leased and committed")
			// Joined by the claims inside it, this transaction is the claims'.
			err := repo.InClaimTx(context.Background(), func(ctx context.Context) error {
				require.Equal(t, ids(messages[10:20]), ids(claim(ctx, "relay-2", 10)), "passes over the leased rows")
				assert.Equal(t, ids(messages[20:30]), ids(claim(others, "relay-3", 10)), "another relay meanwhile")

				// The open claim reads on past every PENDING row; a paid order's message lands after them.
				require.Empty(t, claim(ctx, "relay-2", 100))
				assert.NoError(t, repo.Add(others, outbox.New(uuid.NewString(), []byte(`{}`), now)), "add while a claim is open")
				return nil
			})
			require.NoError(t, err)
		})
	}
}
