package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testkit"
)

// clockSkew is how far each instance's own clock is set from the machine's: one ahead, one
// behind, 3 s apart.
const clockSkew = 1500 * time.Millisecond

// startServerOnLocalClock starts a server on b whose own clock is the machine's moved by skew.
func startServerOnLocalClock(t *testing.T, b backend, skew time.Duration, tweak ...func(*bootstrap.Config)) *server {
	t.Helper()
	local := func() time.Time { return time.Now().Add(skew) }
	return startServerWith(t, b, fx.Decorate(func(bootstrap.LocalClock) bootstrap.LocalClock { return local }), tweak...)
}

// redisTime is Redis's TIME, the clock instances sharing it decide by.
func redisTime(t *testing.T, client *goredis.Client) time.Time {
	t.Helper()
	now, err := client.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UTC()
}

// untilRedisTime waits until Redis's clock shows at, doing check every 20 ms meanwhile.
func untilRedisTime(t *testing.T, client *goredis.Client, at time.Time, check func()) {
	t.Helper()
	for redisTime(t, client).Before(at) {
		check()
		time.Sleep(20 * time.Millisecond)
	}
}

// clockPair starts, on storage of its own on b, an instance whose clock is clockSkew ahead of the
// machine's (Redis's) and one clockSkew behind, with a product for their raffles.
func clockPair(t *testing.T, b backend, drawInterval time.Duration) (ahead, behind *server, productID string) {
	t.Helper()
	b.shareStorage(t)
	draws := func(c *bootstrap.Config) { c.Raffle.DrawInterval = drawInterval }
	ahead = startServerOnLocalClock(t, b, clockSkew, draws)
	behind = startServerOnLocalClock(t, b, -clockSkew, draws)
	product := ahead.do("POST", "/admin/products", ahead.adminToken(), `{"name":"drop","price":100,"stock":5}`)
	if product.status != http.StatusCreated {
		t.Fatalf("product: %d %s", product.status, product.raw)
	}
	return ahead, behind, product.str("id")
}

func createRaffle(t *testing.T, s *server, productID string, closesAt time.Time) string {
	t.Helper()
	created := s.do("POST", "/admin/raffles", s.adminToken(), fmt.Sprintf(`{"name":"drop","winners":1,"closesAt":%q,"productId":%q}`,
		closesAt.Format(time.RFC3339Nano), productID))
	if created.status != http.StatusCreated {
		t.Fatalf("create raffle: %d %s", created.status, created.raw)
	}
	return created.str("id")
}

// TestRaffle_InstancesWhoseClocksDifferCloseItAtOneInstant: with Redis, two instances whose own
// clocks are 3 s apart close a raffle at its closesAt by Redis's clock: the one ahead neither
// refuses an entry nor draws before it, and the one behind refuses an entry from it on.
func TestRaffle_InstancesWhoseClocksDifferCloseItAtOneInstant(t *testing.T) {
	for _, b := range backends(t) {
		if b.name == "memory" {
			continue // one instance: no clock to share
		}
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			enter := func(s *server, raffleID, user string) response {
				return s.do("POST", "/raffles/"+raffleID+"/entries", s.token(user), "")
			}
			// The margin left to each side of closesAt: the clocks' agreement is within
			// milliseconds, a request on a busy machine may take longer.
			const margin = 300 * time.Millisecond

			t.Run("the instance ahead draws at closesAt, not before", func(t *testing.T) {
				t.Parallel()
				ahead, behind, productID := clockPair(t, b, drawInterval)
				redis := redisClient(t, redisURL(t))
				closesAt := redisTime(t, redis).Add(2 * time.Second)
				raffleID := createRaffle(t, behind, productID, closesAt)
				for i, s := range []*server{ahead, behind} {
					if res := enter(s, raffleID, fmt.Sprint("early-", i)); res.status != http.StatusCreated {
						t.Fatalf("entry through instance %d before closesAt: %d %s", i, res.status, res.raw)
					}
				}
				untilRedisTime(t, redis, closesAt.Add(-margin), func() {
					if view := ahead.do("GET", "/raffles/"+raffleID, ahead.adminToken(), ""); view.str("status") != "OPEN" {
						t.Fatalf("%s before closesAt by Redis's clock: %s", closesAt.Sub(redisTime(t, redis)), view.raw)
					}
				})
				testkit.Eventually(t, 200*drawInterval, "the draw", func() error {
					return ahead.do("GET", "/raffles/"+raffleID, ahead.adminToken(), "").hasStatus("DRAWN")
				})
				assertError(t, enter(behind, raffleID, "late"), http.StatusConflict, "RAFFLE_CLOSED")
			})

			t.Run("the instance behind refuses entries from closesAt", func(t *testing.T) {
				t.Parallel()
				// No draw: what refuses the entry is the close, not the drawn raffle.
				_, behind, productID := clockPair(t, b, time.Hour)
				redis := redisClient(t, redisURL(t))
				closesAt := redisTime(t, redis).Add(time.Second)
				raffleID := createRaffle(t, behind, productID, closesAt)
				if res := enter(behind, raffleID, "early"); res.status != http.StatusCreated {
					t.Fatalf("entry before closesAt: %d %s", res.status, res.raw)
				}
				untilRedisTime(t, redis, closesAt.Add(margin), func() {})
				assertError(t, enter(behind, raffleID, "late"), http.StatusConflict, "RAFFLE_CLOSED")
				if view := behind.do("GET", "/raffles/"+raffleID, behind.adminToken(), ""); view.num("entries") != 1 {
					t.Fatalf("entries: %s", view.raw)
				}
			})
		})
	}
}
