package http

import (
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// departures learns that SSE clients left without a goroutine per connection: every detached
// connection's descriptor is registered, one-shot, with one epoll instance for the peer's close
// (or a reset); one goroutine waits on it for the process; closing the descriptor takes it out.
// Registrations are named by a number of their own, never by the descriptor, which a new
// connection may get once this one is closed.
type departures struct {
	epfd int

	mu      sync.Mutex
	next    uint64
	watched map[uint64]*sseStream
}

var (
	departuresOnce    sync.Once
	processDepartures *departures
)

// watchDepartures is the process's departures, started on first use; nil when epoll is
// unavailable, and then every connection is watched by reading.
func watchDepartures() *departures {
	departuresOnce.Do(func() {
		epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			slog.Warn("SSE departures watched by one goroutine per connection: no epoll", "error", err)
			return
		}
		processDepartures = &departures{epfd: epfd, watched: make(map[uint64]*sseStream)}
		go processDepartures.run()
	})
	return processDepartures
}

// watchDeparture closes s (in a goroutine of its own) when c's client closes or resets the
// connection. It answers the registration to unwatch before c is closed on this side, 0 when c
// is watched by reading (not detached).
func watchDeparture(c streamConn, s *sseStream) uint64 {
	d := watchDepartures()
	if d == nil || c.conn != nil {
		if c.conn == nil { // detached, without epoll: only failed writes tell
			return 0
		}
		watchByReading(c.conn, s)
		return 0
	}
	d.mu.Lock()
	d.next++
	id := d.next
	d.watched[id] = s
	d.mu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLHUP | unix.EPOLLERR | unix.EPOLLONESHOT,
		Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
	if err := unix.EpollCtl(d.epfd, unix.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
		unwatchDeparture(id)
		return 0
	}
	return id
}

// detach takes a TCP connection's socket out of Go's runtime: a duplicate descriptor in
// blocking mode whose send timeout is writeTimeout, and the net.Conn closed (its runtime poll
// descriptor and buffers go back). Writers then write with plain system calls, each blocking
// one writer's thread up to the timeout. A connection without a descriptor (a pipe) stays as
// it is.
func detach(conn net.Conn, writeTimeout time.Duration) (int, bool) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return -1, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1, false
	}
	fd, dupErr := -1, error(nil)
	if err := raw.Control(func(f uintptr) { fd, dupErr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil || dupErr != nil {
		return -1, false
	}
	timeout := unix.NsecToTimeval(writeTimeout.Nanoseconds())
	if unix.SetNonblock(fd, false) != nil || unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &timeout) != nil {
		_ = unix.Close(fd)
		return -1, false
	}
	_ = conn.Close() // the duplicate keeps the socket open
	return fd, true
}

// writeFD writes b whole to a detached descriptor; a send that times out (the client does not
// take it) or fails is an error.
func writeFD(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func shutdownFD(fd int) { _ = unix.Shutdown(fd, unix.SHUT_RDWR) }
func closeFD(fd int)    { _ = unix.Close(fd) }

// unwatchDeparture forgets a registration; closing the descriptor takes it out of epoll.
func unwatchDeparture(id uint64) {
	if d := watchDepartures(); d != nil && id != 0 {
		d.mu.Lock()
		delete(d.watched, id)
		d.mu.Unlock()
	}
}

func (d *departures) run() {
	events := make([]unix.EpollEvent, 256)
	for {
		n, err := unix.EpollWait(d.epfd, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			slog.Error("SSE departures: epoll wait failed; departures are now seen by failed writes only", "error", err)
			return
		}
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			d.mu.Lock()
			s := d.watched[id]
			delete(d.watched, id)
			d.mu.Unlock()
			if s != nil {
				go s.close()
			}
		}
	}
}
