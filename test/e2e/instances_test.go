package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testkit"
)

// TestJoin_TwoInstancesShareOneCrew: two servers on one database and one Redis split a stampede;
// their queues meet on the Redis lock and the row lock, and the crew fills exactly, without a 429.
func TestJoin_TwoInstancesShareOneCrew(t *testing.T) {
	for _, b := range backends(t)[1:] {
		t.Run(b.name, func(t *testing.T) {
			b.shareStorage(t)
			stampede(t, []*server{startServer(t, b), startServer(t, b)}, 400, 100)
		})
	}
}

// answerLosses are the ways a request's answer can miss the Redis record after its commit: the
// server was killed (kill -9) between commit and Complete, leaving the record IN_PROGRESS until
// its lease ends, or Redis lost the record.
var answerLosses = []struct {
	name string
	lose func(ctx context.Context, client *goredis.Client, record string) error
}{
	{"server killed before Complete, lease over", func(ctx context.Context, client *goredis.Client, record string) error {
		// What a killed server leaves: IN_PROGRESS, no answer; the lease has run out.
		return client.HSet(ctx, record, "status", "IN_PROGRESS", "lease_until", "0",
			"response_outcome", "", "response_body", "").Err()
	}},
	{"record lost", func(ctx context.Context, client *goredis.Client, record string) error {
		return client.Del(ctx, record).Err()
	}},
}

// idempotencyRecord is the Redis key of the idempotency record of user's key.
func idempotencyRecord(user, key string) string {
	return "rushgate:idem:" + strconv.Itoa(len(user)) + ":" + user + ":" + key
}

// redisClient is a client of the Redis at url, closed when the test ends.
func redisClient(t *testing.T, url string) *goredis.Client {
	t.Helper()
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	client := goredis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// TestJoin_LostAnswerIsReplayedFromTheDatabase: a join committed but its answer never reached
// the Redis record — the server was killed (kill -9) between commit and Complete, leaving the
// record IN_PROGRESS until its lease ends, or Redis lost the record. The client's retry with the
// same key, after the lease, is answered with the original 201 from the marker committed with
// the membership: not 409 ALREADY_MEMBER, and not a second join.
func TestJoin_LostAnswerIsReplayedFromTheDatabase(t *testing.T) {
	for _, b := range backends(t)[1:] {
		for _, loss := range answerLosses {
			t.Run(b.name+"/"+loss.name, func(t *testing.T) {
				t.Parallel()
				databaseURL, redisURL := b.provision(t)
				s := startServer(t, backend{name: b.name, databaseURL: databaseURL, redisURL: redisURL})
				crewID := s.createCrew(5)
				first := s.join(crewID, "lost-answer", "k1")
				if first.status != http.StatusCreated {
					t.Fatalf("join: %d %s", first.status, first.raw)
				}

				client := redisClient(t, redisURL)
				record := idempotencyRecord("lost-answer", s.run+"k1")
				if err := loss.lose(context.Background(), client, record); err != nil {
					t.Fatalf("lose the answer in %s: %v", record, err)
				}

				retry := s.join(crewID, "lost-answer", "k1")
				if retry.status != http.StatusCreated || retry.header.Get("Idempotent-Replayed") != "true" ||
					string(retry.raw) != string(first.raw) {
					t.Fatalf("retry: %d %s (replayed %q), want the first answer %s", retry.status, retry.raw,
						retry.header.Get("Idempotent-Replayed"), first.raw)
				}
				if st := s.stored(crewID); st.currentMembers != 1 || st.members != 1 {
					t.Fatalf("stored %+v", st)
				}
			})
		}
	}
}

// TestWorkers_ExpiredIdempotencyMarkersArePruned: the marker a join commits is deleted by the
// pruning worker once it is older than the idempotency TTL, so the table does not grow without
// bound. The server's clock moves past the TTL when the test says, so the marker is seen before
// it expires however late the test's own read comes.
func TestWorkers_ExpiredIdempotencyMarkersArePruned(t *testing.T) {
	for _, b := range backends(t)[1:] {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock := &shiftedClock{}
			s := startServerOnClock(t, b, clock, func(c *bootstrap.Config) { c.Guard.MarkerPruneInterval = 50 * time.Millisecond })
			markers := func() int {
				var n int
				if err := s.db.QueryRow("SELECT COUNT(*) FROM idempotency_markers").Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			if res := s.join(s.createCrew(5), "pruned", "k1"); res.status != http.StatusCreated {
				t.Fatalf("join: %d %s", res.status, res.raw)
			}
			if n := markers(); n != 1 {
				t.Fatalf("%d markers after one join, want 1", n)
			}
			clock.advance(bootstrap.DefaultConfig().Guard.IdempotencyTTL + time.Second)
			testkit.Eventually(t, 5*time.Second, "the expired marker is pruned", func() error {
				if n := markers(); n != 0 {
					return fmt.Errorf("%d markers", n)
				}
				return nil
			})
		})
	}
}
