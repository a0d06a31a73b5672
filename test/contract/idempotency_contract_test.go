package contract_test

import (
	"context"
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/memory"
	rgredis "github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/ports"
)

var idempotencyBackends = []backend[ports.IdempotencyStore]{
	{"memory", func(*testing.T) ports.IdempotencyStore { return memory.NewIdempotencyStore(system.Clock{}) }},
	{"redis", func(t *testing.T) ports.IdempotencyStore {
		return rgredis.NewIdempotencyStore(redisClient(t), "rushgate:contract:idem:")
	}},
}

const (
	longLease = time.Minute
	longTTL   = time.Minute
	// shortIdempotencyPeriod is a lease or TTL that runs out quickly;
	// waitBeyondShortIdempotencyPeriod surely outlasts it on any backend.
	shortIdempotencyPeriod           = 100 * time.Millisecond
	waitBeyondShortIdempotencyPeriod = 300 * time.Millisecond
)

func newIdempotencyKey() ports.IdempotencyKey {
	return ports.IdempotencyKey{Scope: "user-" + rand.Text(), Key: rand.Text()}
}

func TestIdempotencyStoreContract(t *testing.T) {
	t.Parallel()
	cases := []contractCase[ports.IdempotencyStore]{
		{"Begin_AbsentKeyStartsWithTokenAndFingerprint", testBeginAbsentKey},
		{"Begin_InProgressReportsOriginalFingerprint", testBeginInProgress},
		{"Begin_ConcurrentCallersExactlyOneStarts", testBeginConcurrent},
		{"Begin_ScopesIsolateKeys", testBeginScopesIsolate},
		{"Complete_ReplaysStatusAndBody", testCompleteReplays},
		{"Complete_RenewsTTL", testCompleteRenewsTTL},
		{"Delete_FreesKey", testDeleteFreesKey},
		{"Begin_ExpiredLeaseIsTakenOverAndOldTokenIsFenced", testLeaseTakeover},
		{"Complete_AfterDeleteIsNoOp", testCompleteAfterDelete},
		{"TTL_ExpiryRemovesInProgressRecord", testInProgressTTLExpiry},
		{"TTL_ExpiryRemovesCompletedRecord", testCompletedTTLExpiry},
	}
	runContract(t, idempotencyBackends, cases)
}

// beginExpecting calls Begin and requires it to succeed with the wanted state.
func beginExpecting(t *testing.T, store ports.IdempotencyStore, key ports.IdempotencyKey, fingerprint string,
	lease, ttl time.Duration, want ports.BeginState) ports.BeginResult {
	t.Helper()
	result, err := store.Begin(context.Background(), key, fingerprint, lease, ttl)
	require.NoError(t, err)
	require.Equal(t, want, result.State)
	return result
}

func testBeginAbsentKey(t *testing.T, store ports.IdempotencyStore) {
	started := beginExpecting(t, store, newIdempotencyKey(), "POST /crews/1/join {}", longLease, longTTL, ports.BeginStarted)
	assert.NotEmpty(t, started.Token)
	assert.Equal(t, "POST /crews/1/join {}", started.Fingerprint)
}

func testBeginInProgress(t *testing.T, store ports.IdempotencyStore) {
	key := newIdempotencyKey()
	beginExpecting(t, store, key, "original", longLease, longTTL, ports.BeginStarted)

	again := beginExpecting(t, store, key, "different payload", longLease, longTTL, ports.BeginInProgress)
	assert.Equal(t, "original", again.Fingerprint)
	assert.Empty(t, again.Token, "only the owner holds a token")
}

func testBeginConcurrent(t *testing.T, store ports.IdempotencyStore) {
	const callers = 100
	key := newIdempotencyKey()

	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make(chan ports.BeginResult, callers)
	)
	for range callers {
		wg.Go(func() {
			<-start
			result, err := store.Begin(context.Background(), key, "fp", longLease, longTTL)
			assert.NoError(t, err)
			results <- result
		})
	}
	close(start)
	wg.Wait()
	close(results)

	counts := map[ports.BeginState]int{}
	for result := range results {
		counts[result.State]++
	}
	assert.Equal(t, map[ports.BeginState]int{ports.BeginStarted: 1, ports.BeginInProgress: callers - 1}, counts)
}

func testBeginScopesIsolate(t *testing.T, store ports.IdempotencyStore) {
	key := rand.Text()
	beginExpecting(t, store, ports.IdempotencyKey{Scope: "alice-" + key, Key: key}, "a", longLease, longTTL, ports.BeginStarted)
	bob := beginExpecting(t, store, ports.IdempotencyKey{Scope: "bob-" + key, Key: key}, "b", longLease, longTTL, ports.BeginStarted)
	assert.Equal(t, "b", bob.Fingerprint)

	// Separators inside user input must not make two pairs name one record.
	beginExpecting(t, store, ports.IdempotencyKey{Scope: key + ":x", Key: "y"}, "c", longLease, longTTL, ports.BeginStarted)
	beginExpecting(t, store, ports.IdempotencyKey{Scope: key, Key: "x:y"}, "d", longLease, longTTL, ports.BeginStarted)
}

func testCompleteReplays(t *testing.T, store ports.IdempotencyStore) {
	ctx := context.Background()
	key := newIdempotencyKey()
	started := beginExpecting(t, store, key, "fp", longLease, longTTL, ports.BeginStarted)

	body := []byte(`{"crewId":"c1"}` + "\x00\xff binary-safe")
	require.NoError(t, store.Complete(ctx, key, started.Token, ports.StoredResponse{Status: 201, Body: body}, longTTL))

	replay := beginExpecting(t, store, key, "fp", longLease, longTTL, ports.BeginCompleted)
	assert.Equal(t, "fp", replay.Fingerprint)
	assert.Equal(t, ports.StoredResponse{Status: 201, Body: body}, replay.Response)
}

func testCompleteRenewsTTL(t *testing.T, store ports.IdempotencyStore) {
	ctx := context.Background()
	key := newIdempotencyKey()
	started := beginExpecting(t, store, key, "fp", shortIdempotencyPeriod, shortIdempotencyPeriod, ports.BeginStarted)
	require.NoError(t, store.Complete(ctx, key, started.Token, ports.StoredResponse{Status: 200}, longTTL))

	time.Sleep(waitBeyondShortIdempotencyPeriod)

	replay := beginExpecting(t, store, key, "fp", longLease, longTTL, ports.BeginCompleted)
	assert.Equal(t, 200, replay.Response.Status)
}

func testDeleteFreesKey(t *testing.T, store ports.IdempotencyStore) {
	key := newIdempotencyKey()
	first := beginExpecting(t, store, key, "fp", longLease, longTTL, ports.BeginStarted)
	require.NoError(t, store.Delete(context.Background(), key, first.Token))

	retry := beginExpecting(t, store, key, "fp", longLease, longTTL, ports.BeginStarted)
	assert.NotEqual(t, first.Token, retry.Token)
}

func testLeaseTakeover(t *testing.T, store ports.IdempotencyStore) {
	ctx := context.Background()
	key := newIdempotencyKey()
	crashed := beginExpecting(t, store, key, "fp", shortIdempotencyPeriod, longTTL, ports.BeginStarted)
	beginExpecting(t, store, key, "fp", longLease, longTTL, ports.BeginInProgress)

	time.Sleep(waitBeyondShortIdempotencyPeriod)

	// Another payload never takes the key over: it is told about the original request.
	other := beginExpecting(t, store, key, "other-fp", longLease, longTTL, ports.BeginInProgress)
	assert.Equal(t, "fp", other.Fingerprint)

	takeover := beginExpecting(t, store, key, "fp", longLease, longTTL, ports.BeginStarted)
	assert.NotEqual(t, crashed.Token, takeover.Token)
	assert.Equal(t, "fp", takeover.Fingerprint)

	require.NoError(t, store.Complete(ctx, key, crashed.Token, ports.StoredResponse{Status: 500}, longTTL))
	require.NoError(t, store.Delete(ctx, key, crashed.Token))
	beginExpecting(t, store, key, "fp", longLease, longTTL, ports.BeginInProgress) // the stale token changed nothing

	require.NoError(t, store.Complete(ctx, key, takeover.Token, ports.StoredResponse{Status: 201}, longTTL))
	replay := beginExpecting(t, store, key, "fp", longLease, longTTL, ports.BeginCompleted)
	assert.Equal(t, 201, replay.Response.Status)
}

func testCompleteAfterDelete(t *testing.T, store ports.IdempotencyStore) {
	ctx := context.Background()
	key := newIdempotencyKey()
	started := beginExpecting(t, store, key, "fp", longLease, longTTL, ports.BeginStarted)
	require.NoError(t, store.Delete(ctx, key, started.Token))

	require.NoError(t, store.Complete(ctx, key, started.Token, ports.StoredResponse{Status: 201}, longTTL))
	beginExpecting(t, store, key, "fp", longLease, longTTL, ports.BeginStarted)
}

func testInProgressTTLExpiry(t *testing.T, store ports.IdempotencyStore) {
	key := newIdempotencyKey()
	beginExpecting(t, store, key, "first", longLease, shortIdempotencyPeriod, ports.BeginStarted)

	time.Sleep(waitBeyondShortIdempotencyPeriod)

	fresh := beginExpecting(t, store, key, "second", longLease, longTTL, ports.BeginStarted)
	assert.Equal(t, "second", fresh.Fingerprint, "the record is gone, lease or not")
}

func testCompletedTTLExpiry(t *testing.T, store ports.IdempotencyStore) {
	key := newIdempotencyKey()
	started := beginExpecting(t, store, key, "fp", longLease, longTTL, ports.BeginStarted)
	require.NoError(t, store.Complete(context.Background(), key, started.Token,
		ports.StoredResponse{Status: 201}, shortIdempotencyPeriod))

	time.Sleep(waitBeyondShortIdempotencyPeriod)

	beginExpecting(t, store, key, "fp", longLease, longTTL, ports.BeginStarted)
}

// TestRedisIdempotencyStore_UnreachableRedisIsUnavailableWithoutHanging checks the store's
// infrastructure sentence on a Redis that refuses connections and on one that never answers.
func TestRedisIdempotencyStore_UnreachableRedisIsUnavailableWithoutHanging(t *testing.T) {
	t.Parallel()
	calls := map[string]func(context.Context, ports.IdempotencyStore, ports.IdempotencyKey) error{
		"Begin": func(ctx context.Context, s ports.IdempotencyStore, k ports.IdempotencyKey) error {
			_, err := s.Begin(ctx, k, "fp", longLease, longTTL)
			return err
		},
		"Complete": func(ctx context.Context, s ports.IdempotencyStore, k ports.IdempotencyKey) error {
			return s.Complete(ctx, k, "token", ports.StoredResponse{Status: 201}, longTTL)
		},
		"Delete": func(ctx context.Context, s ports.IdempotencyStore, k ports.IdempotencyKey) error {
			return s.Delete(ctx, k, "token")
		},
	}
	for server, addr := range deadRedisAddrs(t) {
		for name, call := range calls {
			t.Run(server+"/"+name, func(t *testing.T) {
				t.Parallel()
				store := rgredis.NewIdempotencyStore(newRedisClient(t, addr), "rushgate:contract:idem:")

				started := time.Now()
				err := call(context.Background(), store, newIdempotencyKey())
				elapsed := time.Since(started)

				require.ErrorIs(t, err, ports.ErrUnavailable)
				assert.Less(t, elapsed, time.Second, "answered within the configured timeout")
			})
		}
	}
}
