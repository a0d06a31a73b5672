package http

import (
	"encoding/json"
	"net"
	"strconv"
	"sync"
	"time"

	appwaiting "github.com/rushgate/rushgate/application/waiting"
)

// A held SSE connection costs what it keeps: net/http's handler goroutine (its stack grown by
// the middleware chain), its background reader, and 4 KiB read, 4 KiB write and 2 KiB chunking
// buffers come to ~37 KiB each. So the push route takes the connection over once the user is
// in the queue and lets the handler return: what stays is an sseStream and a heartbeat timer,
// no goroutine and no buffer; a bounded pool of writers sends every stream's frames, and one
// epoll instance for the process tells which clients left (sse_departures_linux.go).

const (
	// sseWriterLimit bounds the goroutines writing frames to every held stream at once.
	sseWriterLimit = 32
	// sseWriteTimeout bounds one write: a client that takes longer to accept its frames cannot
	// keep up and is dropped, so it holds a writer that long at most.
	sseWriteTimeout = 5 * time.Second
)

// sseWriters is the bounded pool writing the frames of taken-over streams: a stream with frames
// to send is queued, and up to limit goroutines, started on demand and gone once the queues are
// empty, drain them. Admissions have their own queue, served first: an entry token must not
// wait behind a tick's positions to every other stream. One goroutine, running while any stream
// is held, marks every held stream's heartbeat due each heartbeat period: no timer per stream.
type sseWriters struct {
	limit     int
	heartbeat time.Duration

	mu         sync.Mutex
	admissions []*sseStream
	others     []*sseStream
	running    int

	heldMu  sync.Mutex
	held    map[*sseStream]struct{}
	beating bool
}

func newSSEWriters(limit int, heartbeat time.Duration) *sseWriters {
	return &sseWriters{limit: limit, heartbeat: heartbeat, held: make(map[*sseStream]struct{})}
}

// hold adds a taken-over stream to the heartbeat sweep, starting it if none runs.
func (w *sseWriters) hold(s *sseStream) {
	w.heldMu.Lock()
	defer w.heldMu.Unlock()
	w.held[s] = struct{}{}
	if !w.beating {
		w.beating = true
		go w.beat()
	}
}

// release takes an ended stream out of the heartbeat sweep.
func (w *sseWriters) release(s *sseStream) {
	w.heldMu.Lock()
	defer w.heldMu.Unlock()
	delete(w.held, s)
}

// beat marks a heartbeat due on every held stream each period, until none is held.
func (w *sseWriters) beat() {
	ticker := time.NewTicker(w.heartbeat)
	defer ticker.Stop()
	var due []*sseStream
	for range ticker.C {
		w.heldMu.Lock()
		if len(w.held) == 0 {
			w.beating = false
			w.heldMu.Unlock()
			return
		}
		due = due[:0]
		for s := range w.held {
			due = append(due, s)
		}
		w.heldMu.Unlock()
		for _, s := range due {
			s.heartbeatDue()
		}
	}
}

func (w *sseWriters) enqueue(s *sseStream, admission bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if admission {
		w.admissions = append(w.admissions, s)
	} else {
		w.others = append(w.others, s)
	}
	if w.running < w.limit {
		w.running++
		go w.drain()
	}
}

func (w *sseWriters) drain() {
	var buf []byte // reused for every frame this writer builds
	for {
		s, admission := w.next()
		if s == nil {
			return
		}
		buf = s.flush(buf, admission)
	}
}

// next takes the next stream to write, admissions first; nil when both queues are empty, and
// the writer then ends.
func (w *sseWriters) next() (s *sseStream, admission bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case len(w.admissions) > 0:
		return pop(&w.admissions), true
	case len(w.others) > 0:
		return pop(&w.others), false
	}
	w.running--
	return nil, false
}

func pop(queue *[]*sseStream) *sseStream {
	s := (*queue)[0]
	(*queue)[0] = nil
	*queue = (*queue)[1:]
	return s
}

// pendingFrame flags what a stream has to send.
type pendingFrame uint8

const (
	pendingPosition pendingFrame = 1 << iota
	pendingAdmission
	pendingHeartbeat
	pendingPrequeue
	// pendingSoldOut and pendingReplaced are last frames: the stream ends once one is written.
	pendingSoldOut
	pendingReplaced
)

// pendingLast are the frames after which a stream ends.
const pendingLast = pendingSoldOut | pendingReplaced

// streamStage is how far a stream's user got: pre-queued (or not yet told), waiting in line,
// admitted. A tick tells the streams from a snapshot it took first, while admissions are
// delivered by another goroutine, so a tick's event may reach a stream after its admission: a
// position of a line read before the promotion, or a pre-queue read before the opening (the
// first users of the line are promoted at once). Once placed in line a user never goes back to
// the pre-queue, and once admitted never waits again on that connection, so an event of an
// earlier stage is dropped; framesLocked writes one write's frames in this order too.
type streamStage uint8

const (
	stagePrequeue streamStage = iota
	stageWaiting
	stageAdmitted
)

// sseStream is one push connection, the broker's appwaiting.Stream: events the broker sends
// are kept (the latest position, the admission, a due heartbeat) until a writer sends them.
// Events sent before the connection is taken over wait for it.
type sseStream struct {
	writers      *sseWriters
	writeTimeout time.Duration

	mu       sync.Mutex
	conn     streamConn // from the take-over
	pending  pendingFrame
	position appwaiting.Position
	// prequeue is kept apart, as the admission: only a pre-queue's streams ever hold one.
	prequeue *appwaiting.PrequeueView
	// admission is kept apart: few streams ever hold one at once, every stream a position.
	admission *appwaiting.Admission
	// stage is how far the user got on this connection, which never goes back: an event of an
	// earlier stage the broker sends later comes from an older snapshot (see streamStage) and
	// is dropped.
	stage streamStage
	// A stream is in each of the writers' queues once at most (an admission may overtake it
	// into the other), and written by one writer at a time, who writes until nothing is
	// pending, so its frames keep their order.
	inAdmissions, inOthers, writing bool

	// ended: no more writes; connClosed: the connection was closed, by close or, when a write
	// was in progress then, by its writer.
	ended, connClosed bool
	// leave is the broker's, set at the take-over; watch is the departure watch's registration
	// (0 for none).
	leave func()
	watch uint64
}

// streamConn is a taken-over connection as a stream holds it: on Linux a bare descriptor in
// blocking mode with a send timeout (detach: no net.Conn and no runtime poll descriptor per
// stream), else the net.Conn itself (a pipe, another system).
type streamConn struct {
	taken bool
	conn  net.Conn // nil when detached
	fd    int
}

func (c streamConn) write(timeout time.Duration, b []byte) error {
	if c.conn != nil {
		return writeWithin(c.conn, timeout, b)
	}
	return writeFD(c.fd, b)
}

// shutdown ends the connection at once, also for a write in progress; release then lets go of
// it once no write uses it (a descriptor's number may be reused as soon as it is closed).
func (c streamConn) shutdown() {
	if c.conn != nil {
		_ = c.conn.Close()
		return
	}
	shutdownFD(c.fd)
}

func (c streamConn) release() {
	if c.conn == nil {
		closeFD(c.fd)
	}
}

var _ appwaiting.Stream = (*sseStream)(nil)

func newSSEStream(writers *sseWriters, writeTimeout time.Duration) *sseStream {
	return &sseStream{writers: writers, writeTimeout: writeTimeout}
}

// Position keeps the newest place for the next write, unless the stream was admitted.
func (s *sseStream) Position(p appwaiting.Position) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage > stageWaiting {
		return
	}
	s.stage = stageWaiting
	s.position = p
	s.pendingLocked(pendingPosition)
}

// Admitted keeps the entry token for the next write.
func (s *sseStream) Admitted(a appwaiting.Admission) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.admission = &a
	s.stage = stageAdmitted
	s.pendingLocked(pendingAdmission)
}

// Prequeue keeps the pre-queue's opening for the next write, unless the stream was sent a
// position or the admission.
func (s *sseStream) Prequeue(v appwaiting.PrequeueView) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage > stagePrequeue {
		return
	}
	s.prequeue = &v
	s.pendingLocked(pendingPrequeue)
}

// End closes the connection; its reader then sees it and leaves.
func (s *sseStream) End() { s.close() }

// SoldOut keeps the `soldout` event for the next write, after which the stream ends; a stream
// not taken over yet sends it first thing.
func (s *sseStream) SoldOut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pendingLocked(pendingSoldOut)
}

// Replaced keeps the `replaced` event for the next write, after which the stream ends, as
// SoldOut does.
func (s *sseStream) Replaced() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pendingLocked(pendingReplaced)
}

// start sends events over conn, whose response head is written, until it ends; then leave runs
// once, in a goroutine of its own. The client leaving is learnt without a goroutine of the
// stream's (watchDeparture), or from a write that fails.
func (s *sseStream) start(conn net.Conn, leave func()) {
	c := streamConn{taken: true, conn: conn}
	if fd, ok := detach(conn, s.writeTimeout); ok {
		c = streamConn{taken: true, fd: fd}
	}
	s.mu.Lock()
	s.conn, s.leave = c, leave
	if s.ended {
		s.connClosed = true
		s.mu.Unlock()
		c.shutdown()
		c.release()
		go leave()
		return
	}
	// Watched and held before any write can fail and close it: close then finds both to undo,
	// and the descriptor is still this connection's when it is registered.
	s.watch = watchDeparture(c, s)
	s.writers.hold(s)
	s.scheduleLocked()
	s.mu.Unlock()
}

func (s *sseStream) heartbeatDue() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.pendingLocked(pendingHeartbeat)
	}
}

func (s *sseStream) pendingLocked(f pendingFrame) {
	s.pending |= f
	s.scheduleLocked()
}

// scheduleLocked queues the stream for a writer when it has frames and a connection, unless a
// writer is on it already or it waits in the queue its frames belong to.
func (s *sseStream) scheduleLocked() {
	if s.pending == 0 || !s.conn.taken || s.writing || s.ended {
		return
	}
	switch admission := s.pending&pendingAdmission != 0; {
	case admission && !s.inAdmissions:
		s.inAdmissions = true
		s.writers.enqueue(s, true)
	case !admission && !s.inOthers:
		s.inOthers = true
		s.writers.enqueue(s, false)
	}
}

// flush, for a writer that took the stream off a queue, writes the pending frames until none
// are left, in buf (returned for reuse); a write that fails or times out ends the stream.
func (s *sseStream) flush(buf []byte, fromAdmissions bool) []byte {
	s.mu.Lock()
	if fromAdmissions {
		s.inAdmissions = false
	} else {
		s.inOthers = false
	}
	if s.writing {
		s.mu.Unlock()
		return buf
	}
	s.writing = true
	for s.pending != 0 && !s.ended {
		last := s.pending&pendingLast != 0
		buf = s.framesLocked(buf[:0])
		conn := s.conn
		s.mu.Unlock()
		err := conn.write(s.writeTimeout, buf)
		if err != nil || last {
			s.close()
		}
		s.mu.Lock()
	}
	s.writing = false
	release := s.ended && !s.connClosed
	if release {
		s.connClosed = true
	}
	conn := s.conn
	s.mu.Unlock()
	if release { // close left it to this writer
		conn.release()
	}
	return buf
}

// framesLocked appends the pending frames to buf and clears them.
func (s *sseStream) framesLocked(buf []byte) []byte {
	if s.pending&pendingPrequeue != 0 {
		buf = appendEvent(buf, "prequeue", time.Time{}, wirePrequeue(*s.prequeue))
		s.prequeue = nil
	}
	if s.pending&pendingPosition != 0 {
		buf = appendEvent(buf, "position", s.position.Tick, wirePosition(s.position.PositionView))
	}
	if s.pending&pendingAdmission != 0 {
		buf = appendEvent(buf, "admitted", s.admission.PromotedAt, wireEntryToken(s.admission.TokenView))
		s.admission = nil
	}
	if s.pending&pendingHeartbeat != 0 {
		buf = append(buf, ": heartbeat\n\n"...)
	}
	if s.pending&pendingSoldOut != 0 {
		buf = appendEvent(buf, "soldout", time.Time{}, struct{}{})
	}
	if s.pending&pendingReplaced != 0 {
		buf = appendEvent(buf, "replaced", time.Time{}, struct{}{})
	}
	s.pending = 0
	return buf
}

// close ends the stream once: no more writes or heartbeats, the connection is shut down (a
// write in progress gives up) and closed, by the writer if one is writing, and a taken-over
// stream leaves, in a goroutine: End is called with the broker's lock held.
func (s *sseStream) close() {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	conn, leave, watch := s.conn, s.leave, s.watch
	release := conn.taken && !s.writing
	if release {
		s.connClosed = true
	}
	s.mu.Unlock()
	if conn.taken {
		s.writers.release(s)
		unwatchDeparture(watch)
		conn.shutdown()
		if release {
			conn.release()
		}
		go leave()
	}
}

// appendEvent appends one event; its id is at (unix ms: the tick of a position, the promotion
// of an admission), so clients can measure how late it arrived. Zero at writes no id.
func appendEvent(buf []byte, name string, at time.Time, data any) []byte {
	body, err := json.Marshal(data)
	if err != nil {
		return buf // the views are plain structs: never happens
	}
	if !at.IsZero() {
		buf = append(buf, "id: "...)
		buf = strconv.AppendInt(buf, at.UnixMilli(), 10)
		buf = append(buf, '\n')
	}
	buf = append(buf, "event: "...)
	buf = append(buf, name...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, body...)
	return append(buf, "\n\n"...)
}

// writeWithin writes b to conn, failing if the client does not take it within timeout.
func writeWithin(conn net.Conn, timeout time.Duration, b []byte) error {
	if err := conn.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	_, err := conn.Write(b)
	return err
}
