package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/test/testkit"
)

// TestMain lets startStreamClients start this test binary as its stream clients, as
// rushgate-load starts itself.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == streamClientCommand {
		main()
		return
	}
	os.Exit(m.Run())
}

// streamRecorder keeps what the clients report.
type streamRecorder struct {
	mu         sync.Mutex
	openedOnes []int
	posLags    []time.Duration
	tokens     map[int]string
	promoted   map[int]time.Time
	firstRanks map[int]int
	rankTicks  map[int]time.Time
	admLags    []time.Duration
	endedOnes  []int
	rose       []int
	soldOuts   map[int][2]time.Time // told, ended
}

func (r *streamRecorder) opened(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.openedOnes = append(r.openedOnes, i)
}

func (r *streamRecorder) positions(lags []time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.posLags = append(r.posLags, lags...)
}

func (r *streamRecorder) admitted(i int, lag time.Duration, token string, promoted time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tokens[i] = token
	r.promoted[i] = promoted
	r.admLags = append(r.admLags, lag)
}

func (r *streamRecorder) ranked(i int, tick time.Time, rank int, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.firstRanks[i] = rank
	r.rankTicks[i] = tick
	if at.Before(tick) {
		r.firstRanks[i] = -1 // received before its tick: the report is wrong
	}
}

func (r *streamRecorder) soldout(i int, told, ended time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.soldOuts[i] = [2]time.Time{told, ended}
}

func (r *streamRecorder) ended(i int, rose bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.endedOnes = append(r.endedOnes, i)
	if rose {
		r.rose = append(r.rose, i)
	}
}

// holdUntilGone sends what stream i was written and holds it until its client leaves.
func holdUntilGone(w http.ResponseWriter, r *http.Request, left chan<- int, i int) {
	w.(http.Flusher).Flush()
	<-r.Context().Done()
	left <- i
}

// awaitLeft is the next stream to leave the server.
func awaitLeft(t *testing.T, left <-chan int) int {
	t.Helper()
	select {
	case i := <-left:
		return i
	case <-time.After(10 * time.Second):
		t.Fatal("no admitted stream left")
		return -1
	}
}

// startRecordedClients starts clients for streams streams, reporting to a new recorder.
func startRecordedClients(t *testing.T, streams int) (*streamRecorder, *streamClients) {
	t.Helper()
	rec := &streamRecorder{tokens: map[int]string{}, promoted: map[int]time.Time{}, firstRanks: map[int]int{}, rankTicks: map[int]time.Time{}, soldOuts: map[int][2]time.Time{}}
	clients, err := startStreamClients(streams, 5*time.Second, rec, os.Stderr)
	require.NoError(t, err)
	return rec, clients
}

func (r *streamRecorder) endedSorted() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.endedOnes))
}

// A stream client opens each stream with its Authorization, reports the opening as an attempt
// (a refusal with its status and body), relays each admission with the lag its id names, holds
// an admitted stream until released, and ends every stream once its input ends; then it sends
// every position's lag, and each stream's end says whether its rank rose; each stream's first
// position is reported with its tick, and each admission with its promotion (the ids).
func TestStreamClients_RelayEachStreamsEventsAndLeaveOnlyOnceReleased(t *testing.T) {
	left := make(chan int, 3)
	sources := make(chan string, 3)
	tick := time.Now().Add(-100 * time.Millisecond).UnixMilli()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		sources <- host
		var i int
		if _, err := fmt.Sscanf(r.URL.Path, "/s/%d", &i); err != nil || r.Header.Get("Authorization") != fmt.Sprintf("Bearer user %d", i) {
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"error":"FORBIDDEN"}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		first, second := 3, 2
		if i == 2 {
			first, second = 2, 3
		}
		_, _ = fmt.Fprintf(w, "id: %d\nevent: position\ndata: {\"rank\":%d}\n\nid: %d\nevent: position\ndata: {\"rank\":%d}\n\n", tick, first, tick, second)
		if i == 0 {
			_, _ = fmt.Fprintf(w, "id: %d\nevent: admitted\ndata: {\"token\":\"tok-0\"}\n\n", tick)
		}
		holdUntilGone(w, r, left, i)
	}))
	defer srv.Close()

	rec, clients := startRecordedClients(t, 3)
	defer clients.close()

	a := clients.open(0, srv.URL+"/s/0", "Bearer user 0")
	require.NoError(t, a.err)
	assert.True(t, a.ok)
	assert.Equal(t, http.StatusOK, a.status)
	assert.Positive(t, a.latency)
	a = clients.open(1, srv.URL+"/s/1", "Bearer someone else")
	assert.False(t, a.ok)
	assert.Equal(t, http.StatusForbidden, a.status)
	assert.Equal(t, `{"error":"FORBIDDEN"}`, a.detail)
	a = clients.open(2, srv.URL+"/s/2", "Bearer user 2")
	require.True(t, a.ok)
	a = clients.open(3, "http://127.0.0.1:1/s/3", "Bearer user 3")
	assert.Error(t, a.err, "nobody listens on port 1")

	testkit.Eventually(t, 10*time.Second, "stream 0's admission", func() error {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if rec.tokens[0] == "" {
			return fmt.Errorf("tokens %v", rec.tokens)
		}
		return nil
	})
	rec.mu.Lock()
	assert.Equal(t, map[int]string{0: "tok-0"}, rec.tokens)
	assert.Equal(t, []int{0, 2}, slices.Sorted(slices.Values(rec.openedOnes)))
	assert.Equal(t, map[int]time.Time{0: time.UnixMilli(tick)}, rec.promoted)
	rec.mu.Unlock()
	testkit.Eventually(t, 10*time.Second, "the first positions", func() error {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.firstRanks) < 2 {
			return fmt.Errorf("first ranks %v", rec.firstRanks)
		}
		return nil
	})
	rec.mu.Lock()
	assert.Equal(t, map[int]int{0: 3, 2: 2}, rec.firstRanks, "each stream's first rank, once")
	assert.Equal(t, map[int]time.Time{0: time.UnixMilli(tick), 2: time.UnixMilli(tick)}, rec.rankTicks)
	rec.mu.Unlock()

	files, err := clients.mostFiles()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, files, 2, "a descriptor per held stream at least")
	assert.Empty(t, rec.endedSorted(), "the admitted stream is held until released")

	require.NoError(t, clients.release())
	assert.Equal(t, 0, awaitLeft(t, left), "only the admitted one leaves")
	testkit.Eventually(t, 10*time.Second, "stream 0 reported ended", func() error {
		if got := rec.endedSorted(); !slices.Equal(got, []int{0}) {
			return fmt.Errorf("ended %v", got)
		}
		return nil
	})

	clients.close()
	assert.Equal(t, []int{0, 2}, rec.endedSorted(), "closing ends every stream still held")
	assert.Equal(t, []int{2}, rec.rose, "stream 2's rank went from 2 to 3")
	assert.Len(t, rec.posLags, 4, "two positions on each of two streams")
	for _, lag := range append(rec.posLags, rec.admLags...) {
		assert.GreaterOrEqual(t, lag, 100*time.Millisecond, "receipt − the id's instant")
	}
	assert.Equal(t, 2, <-left)
	for range 3 {
		assert.Equal(t, "127.0.0.2", <-sources, "client 0 dials a loopback server from 127.0.0.2")
	}
}

// An admitted stream leaves alone once let leave (its checkout done), another admitted one stays
// held; a waiting stream sent `event: soldout` and ended by the server is reported told, with
// when it was told and when it ended.
func TestStreamClients_LetOneAdmittedStreamLeaveAndReportTheSoldOutOnes(t *testing.T) {
	left := make(chan int, 3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var i int
		_, _ = fmt.Sscanf(r.URL.Path, "/s/%d", &i)
		w.Header().Set("Content-Type", "text/event-stream")
		now := time.Now().UnixMilli()
		if i == 1 {
			_, _ = fmt.Fprintf(w, "id: %d\nevent: position\ndata: {\"rank\":0}\n\nid: %d\nevent: soldout\ndata: {}\n\n", now, now)
			return // the server ends a stream told sold out
		}
		_, _ = fmt.Fprintf(w, "id: %d\nevent: admitted\ndata: {\"token\":\"tok-%d\"}\n\n", now, i)
		holdUntilGone(w, r, left, i)
	}))
	defer srv.Close()

	rec, clients := startRecordedClients(t, 3)
	defer clients.close()
	before := time.Now()
	for i := range 3 {
		require.True(t, clients.open(i, fmt.Sprintf("%s/s/%d", srv.URL, i), "Bearer u").ok)
	}
	testkit.Eventually(t, 10*time.Second, "two admissions and stream 1 told", func() error {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.tokens) < 2 || len(rec.soldOuts) < 1 {
			return fmt.Errorf("tokens %v, sold out %v", rec.tokens, rec.soldOuts)
		}
		return nil
	})
	rec.mu.Lock()
	told := rec.soldOuts[1]
	assert.Len(t, rec.soldOuts, 1, "only the waiting stream is told")
	rec.mu.Unlock()
	assert.False(t, told[0].Before(before), "told after it was opened")
	assert.False(t, told[1].Before(told[0]), "ended after it was told")
	assert.Equal(t, []int{1}, rec.endedSorted(), "the server ended the told stream")

	require.NoError(t, clients.leave(2))
	assert.Equal(t, 2, awaitLeft(t, left), "only the stream let leave leaves")
	testkit.Eventually(t, 10*time.Second, "stream 2 reported ended", func() error {
		if got := rec.endedSorted(); !slices.Equal(got, []int{1, 2}) {
			return fmt.Errorf("ended %v", got)
		}
		return nil
	})
	clients.close()
	assert.Equal(t, 0, <-left, "closing ends the admitted stream still held")
}
