package gormdb_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
)

// TestCrewSave_CountOutsideCapacityIsRefusedByTheSchema: the database is the last line of
// defence, so a member count the domain should never produce, above the capacity or below
// zero, is refused by the crews_members_within_capacity constraint and the stored count stays.
func TestCrewSave_CountOutsideCapacityIsRefusedByTheSchema(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := openMigrated(t, fresh, gormdb.Options{})
			crews := gormdb.NewCrewRepository(db)
			const capacity = 3
			c, err := crew.New(rand.Text(), "bounded", capacity, time.Now().UTC().Truncate(time.Microsecond))
			require.NoError(t, err)
			require.NoError(t, crews.Create(ctx, c))

			for _, currentMembers := range []int{capacity + 1, -1} {
				corrupt := crew.Rebuild(c.ID(), c.Name(), c.MaxMembers(), currentMembers, c.CreatedAt())

				err := crews.Save(ctx, corrupt)

				assert.ErrorIs(t, err, gormdb.ErrCheckViolation, "count %d", currentMembers)
				assert.NotErrorIs(t, err, ports.ErrUnavailable, "count %d: a refusal, not an outage", currentMembers)
				stored, err := crews.Get(ctx, c.ID())
				require.NoError(t, err)
				assert.Zero(t, stored.CurrentMembers(), "count %d: stored count unchanged", currentMembers)
			}
		})
	}
}
