package http

import (
	"bufio"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	appwaiting "github.com/rushgate/rushgate/application/waiting"
)

// startedStream is an sseStream taken over on one end of a pipe; client is the other end, and
// left is closed when the stream calls its leave.
type startedStream struct {
	stream *sseStream
	client net.Conn
	left   chan struct{}
}

// newStartedStream starts a stream after before ran on it (events sent ahead of the take-over).
func newStartedStream(t *testing.T, heartbeat, writeTimeout time.Duration, before func(*sseStream)) startedStream {
	t.Helper()
	server, client := net.Pipe()
	t.Cleanup(func() { _ = client.Close() })
	s := startedStream{stream: newSSEStream(newSSEWriters(2, heartbeat), writeTimeout), client: client,
		left: make(chan struct{})}
	if before != nil {
		before(s.stream)
	}
	s.stream.start(server, func() { close(s.left) })
	return s
}

func (s startedStream) requireLeft(t *testing.T, why string) {
	t.Helper()
	select {
	case <-s.left:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: the stream did not leave", why)
	}
}

// readFrames reads n frames (up to their blank line) off the client end.
func readFrames(t *testing.T, client net.Conn, n int) string {
	t.Helper()
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(client)
	var got []byte
	for frames := 0; frames < n; {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("read frame %d: %v (so far %q)", frames, err, got)
		}
		got = append(got, line...)
		if string(line) == "\n" {
			frames++
		}
	}
	return string(got)
}

func position(rank int, tick time.Time) appwaiting.Position {
	wait := 3
	return appwaiting.Position{Tick: tick, PositionView: appwaiting.PositionView{Rank: rank, AheadCount: rank,
		QueueSize: 10, EstimatedWaitSeconds: &wait}}
}

func TestSSEStream_SendsTheLatestEventsInTheirFormat(t *testing.T) {
	tick := time.UnixMilli(1_700_000_000_123)
	promoted := time.UnixMilli(1_700_000_001_456)
	s := newStartedStream(t, time.Hour, time.Second, func(st *sseStream) {
		// Before the take-over: the older position is replaced by the newer one.
		st.Position(position(5, tick.Add(-time.Second)))
		st.Position(position(4, tick))
	})
	want := "id: 1700000000123\nevent: position\ndata: {\"rank\":4,\"aheadCount\":4,\"queueSize\":10,\"estimatedWaitSeconds\":3}\n\n"
	if got := readFrames(t, s.client, 1); got != want {
		t.Fatalf("first frame %q, want %q", got, want)
	}
	expires := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	s.stream.Admitted(appwaiting.Admission{TokenView: appwaiting.TokenView{Token: "tok", ExpiresAt: expires},
		PromotedAt: promoted})
	want = "id: 1700000001456\nevent: admitted\ndata: {\"token\":\"tok\",\"expiresAt\":\"2026-11-21T09:00:00Z\"}\n\n"
	if got := readFrames(t, s.client, 1); got != want {
		t.Fatalf("admitted frame %q, want %q", got, want)
	}
	// A repeated admission (a reconnect) has no promotion time, so no id.
	s.stream.Admitted(appwaiting.Admission{TokenView: appwaiting.TokenView{Token: "tok", ExpiresAt: expires}})
	want = "event: admitted\ndata: {\"token\":\"tok\",\"expiresAt\":\"2026-11-21T09:00:00Z\"}\n\n"
	if got := readFrames(t, s.client, 1); got != want {
		t.Fatalf("repeated admitted frame %q, want %q", got, want)
	}
}

func TestSSEStream_SendsHeartbeats(t *testing.T) {
	s := newStartedStream(t, 10*time.Millisecond, time.Second, nil)
	if got, want := readFrames(t, s.client, 3), ": heartbeat\n\n: heartbeat\n\n: heartbeat\n\n"; got != want {
		t.Fatalf("frames %q, want %q", got, want)
	}
}

func TestSSEStream_LeavesWhenTheClientDisconnects(t *testing.T) {
	s := newStartedStream(t, time.Hour, time.Second, nil)
	_ = s.client.Close()
	s.requireLeft(t, "client closed")
}

func TestSSEStream_DropsAClientThatStopsReading(t *testing.T) {
	// A pipe buffers nothing: the unread position blocks its write until the write timeout.
	s := newStartedStream(t, time.Hour, 50*time.Millisecond, nil)
	s.stream.Position(position(1, time.Now()))
	s.requireLeft(t, "client not reading")
	_ = s.client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.client.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after the drop: %v, want EOF (connection closed)", err)
	}
}

func TestSSEStream_EndClosesTheConnectionAndLeaves(t *testing.T) {
	s := newStartedStream(t, time.Hour, time.Second, nil)
	s.stream.End()
	s.requireLeft(t, "ended by the broker")
	_ = s.client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.client.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after End: %v, want EOF", err)
	}
}

// SoldOut and Replaced are last words: the stream sends its event, then closes and leaves.
func TestSSEStream_SoldOutAndReplacedAreSentLastThenItEnds(t *testing.T) {
	for event, tell := range map[string]func(*sseStream){"soldout": (*sseStream).SoldOut, "replaced": (*sseStream).Replaced} {
		t.Run(event, func(t *testing.T) {
			s := newStartedStream(t, time.Hour, time.Second, nil)
			tell(s.stream)
			if got, want := readFrames(t, s.client, 1), "event: "+event+"\ndata: {}\n\n"; got != want {
				t.Fatalf("frame %q, want %q", got, want)
			}
			s.requireLeft(t, event)
			_ = s.client.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := s.client.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
				t.Fatalf("read after %s: %v, want EOF", event, err)
			}
		})
	}
}

func TestSSEStream_EndedBeforeTheTakeOverLeavesAtOnce(t *testing.T) {
	s := newStartedStream(t, time.Hour, time.Second, func(st *sseStream) { st.End() })
	s.requireLeft(t, "ended before start")
}

func TestSSEWriters_ServeAdmissionsFirst(t *testing.T) {
	w := newSSEWriters(0, time.Hour) // no writer starts: the test takes from the queues itself
	waiting, admitted := &sseStream{}, &sseStream{}
	w.enqueue(waiting, false)
	w.enqueue(admitted, true)
	if s, admission := w.next(); s != admitted || !admission {
		t.Fatal("the admission is not written first")
	}
	if s, admission := w.next(); s != waiting || admission {
		t.Fatal("the position is not written next")
	}
}

// tcpPairs answers n connected loopback TCP pairs: the server ends and the client ends.
func tcpPairs(t *testing.T, n int) (servers, clients []net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for range n {
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = client.Close()
			_ = server.Close()
		})
		servers, clients = append(servers, server), append(clients, client)
	}
	return servers, clients
}

// Over TCP a held stream costs no goroutine of its own, and a client that leaves is still
// noticed at once (not at the next heartbeat's failed write).
func TestSSEStream_TCPStreamsHoldNoGoroutineAndSeeTheirClientsLeave(t *testing.T) {
	const n = 200
	servers, clients := tcpPairs(t, n)
	writers := newSSEWriters(2, time.Hour)
	before := runtime.NumGoroutine()
	left := make(chan int, n)
	streams := make([]*sseStream, n)
	for i, conn := range servers {
		streams[i] = newSSEStream(writers, time.Second)
		streams[i].start(conn, func() { left <- i })
	}
	// The departure watch and the heartbeat sweep: one goroutine each, whatever n.
	if grew := runtime.NumGoroutine() - before; grew > 2 {
		t.Fatalf("%d streams added %d goroutines", n, grew)
	}
	streams[n-1].Position(position(7, time.UnixMilli(1_700_000_000_000)))
	want := "id: 1700000000000\nevent: position\ndata: {\"rank\":7,\"aheadCount\":7,\"queueSize\":10,\"estimatedWaitSeconds\":3}\n\n"
	if got := readFrames(t, clients[n-1], 1); got != want {
		t.Fatalf("frame %q, want %q", got, want)
	}
	for _, c := range clients {
		_ = c.Close()
	}
	seen := make(map[int]bool)
	for len(seen) < n {
		select {
		case i := <-left:
			if seen[i] {
				t.Fatalf("stream %d left twice", i)
			}
			seen[i] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d streams left after their clients closed", len(seen), n)
		}
	}
}

// The broker sends positions from a snapshot of the line it took before it told the stream of
// the admission, so a position may come after it: the client, admitted, must never be told it
// waits again (the waiting page would go back to its place and leave the seats).
func TestSSEStream_SendsNoPositionAfterTheAdmission(t *testing.T) {
	s := newStartedStream(t, time.Hour, time.Second, nil)
	s.stream.Admitted(appwaiting.Admission{TokenView: appwaiting.TokenView{Token: "tok", ExpiresAt: time.Now().Add(time.Minute)}})
	if got := readFrames(t, s.client, 1); !strings.HasPrefix(got, "event: admitted\n") {
		t.Fatalf("first frame %q, want the admission", got)
	}
	s.stream.Position(position(0, time.Now())) // from the snapshot taken before the promotion
	s.stream.heartbeatDue()
	if got, want := readFrames(t, s.client, 1), ": heartbeat\n\n"; got != want {
		t.Fatalf("frame after the admission %q, want %q", got, want)
	}
}

// A pre-queue a tick read before the sale opened may reach the stream after the admission,
// delivered meanwhile to one of the line's first users: placed in line (a position) or
// admitted, the client must never be told it waits for the sale to open again (the waiting page
// would leave its place or its seats for "the sale opens at…", and an admitted one stay there).
func TestSSEStream_SendsNoPrequeueOncePlacedInLine(t *testing.T) {
	view := appwaiting.PrequeueView{OpensAt: time.Now(), SeedHash: "hash"}
	admission := appwaiting.Admission{TokenView: appwaiting.TokenView{Token: "tok", ExpiresAt: time.Now().Add(time.Minute)}}
	for _, tc := range []struct {
		name   string
		placed func(*sseStream)
		event  string
	}{
		{"after a position", func(s *sseStream) { s.Position(position(3, time.Now())) }, "position"},
		{"after the admission", func(s *sseStream) { s.Admitted(admission) }, "admitted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStartedStream(t, time.Hour, time.Second, nil)
			s.stream.Prequeue(view)
			if got := readFrames(t, s.client, 1); !strings.HasPrefix(got, "event: prequeue\n") {
				t.Fatalf("first frame %q, want the pre-queue", got)
			}
			tc.placed(s.stream)
			if got := readFrames(t, s.client, 1); !strings.Contains(got, "event: "+tc.event+"\n") {
				t.Fatalf("second frame %q, want the %s", got, tc.event)
			}
			s.stream.Prequeue(view) // read before the opening
			s.stream.heartbeatDue()
			if got, want := readFrames(t, s.client, 1), ": heartbeat\n\n"; got != want {
				t.Fatalf("frame after the %s %q, want %q", tc.event, got, want)
			}
		})
	}
}
