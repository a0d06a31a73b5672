package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rghttp "github.com/rushgate/rushgate/adapters/http"
)

func TestInstances_PickRoundRobinsByRequestNumber(t *testing.T) {
	t.Parallel()
	in := newInstances([]string{"http://a", "http://b", "http://c"}, 4, time.Second)
	var got []string
	for i := range 7 {
		k, url := in.pick(i)
		assert.Equal(t, in.urls[k], url)
		got = append(got, url)
	}
	assert.Equal(t, []string{"http://a", "http://b", "http://c", "http://a", "http://b", "http://c", "http://a"}, got)
}

func TestURLList_ReplacesTheDefaultAndTakesRepeatsAndCommas(t *testing.T) {
	t.Parallel()
	u := urlList{urls: []string{"http://default"}}
	require.NoError(t, u.Set("http://a:1/"))
	require.NoError(t, u.Set(" http://b:2 , https://c:3"))
	assert.Equal(t, []string{"http://a:1", "http://b:2", "https://c:3"}, u.urls)
	assert.Equal(t, "http://a:1,http://b:2,https://c:3", u.String())

	assert.Error(t, (&urlList{}).Set("a:1"))
	assert.Error(t, (&urlList{}).Set(" , "))
}

// fakeRushgate is a rushgate stand-in: it creates crews and answers joins with answer, and
// records which user's join each server got.
type fakeRushgate struct {
	tokens *rghttp.Tokens
	answer func(user string) (int, string)

	mu     sync.Mutex
	crews  int
	joined map[string][]string // server name → users, in arrival order
}

func (f *fakeRushgate) server(t *testing.T, name string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := f.tokens.Verify(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		if err != nil {
			http.Error(w, `{"error":"UNAUTHORIZED"}`, http.StatusUnauthorized)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if r.URL.Path == "/crews" {
			f.crews++
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, `{"id":"crew-%d"}`, f.crews)
			return
		}
		if r.Header.Get(rghttp.IdempotencyKeyHeader) == "" {
			http.Error(w, `{"error":"IDEMPOTENCY_KEY_REQUIRED"}`, http.StatusBadRequest)
			return
		}
		f.joined[name] = append(f.joined[name], p.UserID)
		status, code := f.answer(p.UserID)
		w.WriteHeader(status)
		if code != "" {
			_, _ = fmt.Fprintf(w, `{"error":%q}`, code)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestCrewJoin_SpreadsItsRequestsRoundRobinOverTheInstancesAndCounts429sAsSuch(t *testing.T) {
	t.Parallel()
	tokens := rghttp.NewTokens([]byte("test-secret-test-secret-test-secret-0"))
	fake := &fakeRushgate{tokens: tokens, joined: map[string][]string{}}
	fake.answer = func(user string) (int, string) {
		if strings.HasSuffix(user, "-3") || strings.HasSuffix(user, "-7") {
			return http.StatusTooManyRequests, "TOO_MANY_REQUESTS"
		}
		return http.StatusCreated, ""
	}
	a, b := fake.server(t, "a"), fake.server(t, "b")
	e := &env{runID: "r1", api: newInstances([]string{a.URL, b.URL}, 4, 5*time.Second), tokens: tokens, timeout: 5 * time.Second}
	sc := buildCrew(t, "crew-spread", config{users: 10, crews: 2})

	require.NoError(t, sc.prepare(t.Context(), e))
	attempts, elapsed := runConcurrently(t.Context(), sc.run(e), 4)
	s := statsOf(attempts, elapsed)

	assert.Equal(t, []string{"crew-1", "crew-2"}, sc.crewIDs)
	assert.ElementsMatch(t, []string{"load-r1-0", "load-r1-2", "load-r1-4", "load-r1-6", "load-r1-8"}, fake.joined["a"])
	assert.ElementsMatch(t, []string{"load-r1-1", "load-r1-3", "load-r1-5", "load-r1-7", "load-r1-9"}, fake.joined["b"])
	assert.Equal(t, map[int]int{0: 5, 1: 5}, s.perInstance)
	assert.Equal(t, 8, s.succeeded)
	assert.Equal(t, 2, s.count429())
	assert.Zero(t, s.errors)
	assert.Zero(t, s.count5xx())
	for i, a := range attempts {
		assert.Equal(t, i%2, a.instance, "request %d", i)
	}
}
