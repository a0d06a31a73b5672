package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/system"
	appcrew "github.com/rushgate/rushgate/application/crew"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/guard/guardtest"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// TestCrewJoin_AnUncontendedJoinWaitsForTwoRedisRoundTrips: on Redis (one server or a
// cluster, where the key and the lock live in different slots) and each database, a join of a
// crew nobody else is joining makes four calls to Redis — the idempotency key, the lock, the
// record, the unlock — and waits for them in two turns: key with lock, record with unlock.
func TestCrewJoin_AnUncontendedJoinWaitsForTwoRedisRoundTrips(t *testing.T) {
	// A call is held up to this long for a partner: only a regression waits for it.
	const alone = 10 * time.Second
	memoryStores := func(*testing.T) ports.Stores { return memory.NewStores(memory.NewDatabase()) }
	sqlOn := func(fresh func(testing.TB) testenv.Database) func(*testing.T) ports.Stores {
		return func(t *testing.T) ports.Stores { return gormdb.NewStores(openSQL(t, fresh(t), testenv.DBOptions())) }
	}
	cases := []struct {
		name   string
		redis  func(testing.TB) string
		stores func(*testing.T) ports.Stores
	}{
		{"redis+postgres", redisURL, sqlOn(testenv.Postgres)},
		{"redis+mysql", redisURL, sqlOn(testenv.MySQL)},
		{"redis-cluster+memory", testenv.RedisCluster, memoryStores},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			stores := c.stores(t)
			coord := redisCoordination(t, c.redis(t))
			trips := guardtest.NewRoundTrips(alone)
			clock := system.Clock{}
			g := guard.New(guard.Deps{Idempotency: trips.Store(coord.Idempotency), Locker: trips.Locker(coord.Locker),
				Clock: clock, Sleeper: system.Sleeper{}, Tx: stores.Tx, Markers: stores.Markers}, guard.Config{})
			crews := appcrew.NewService(appcrew.Deps{Tx: stores.Tx, Crews: stores.Crews, Members: stores.CrewMembers,
				Guard: g, Clock: clock, IDs: system.UUIDs{}}, appcrew.Config{})
			join := func() string {
				t.Helper()
				created, err := crews.Create(ctx, appcrew.CreateCommand{Name: "counted", MaxMembers: 10})
				require.NoError(t, err)
				user := "user-" + uuid.NewString()
				trips.Reset()
				res, err := crews.Join(ctx, appcrew.JoinCommand{CrewID: created.ID, UserID: user, IdempotencyKey: "k-" + user})
				require.NoError(t, err)
				require.Equal(t, 1, res.Value.CurrentMembers)
				// The unlock may still be on its way once the answer is out; it went with the record.
				testkit.Eventually(t, alone, "the lock released", func() error {
					if waits := fmt.Sprint(trips.Waits()); !strings.Contains(waits, "release") {
						return fmt.Errorf("waits so far %s", waits)
					}
					return nil
				})
				return fmt.Sprint(trips.Waits())
			}
			join() // warms the connections and the release-notice subscription
			require.Equal(t, "[acquire+begin complete+release]", join(), "the Redis calls of one join, by sequential wait")
		})
	}
}
