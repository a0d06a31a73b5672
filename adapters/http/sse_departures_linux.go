package http

import (
	"log/slog"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// departures learns that SSE clients left without a goroutine per connection: every taken-over
// connection's descriptor is registered, one-shot, with one epoll instance for the peer's close
// (or a reset); one goroutine waits on it for the process. The descriptor stays in Go's own
// poller too: epoll allows a descriptor in several instances, and closing it takes it out of
// both. Registrations are named by a number of their own, never by the descriptor, which a new
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

// watchDeparture closes s (in a goroutine of its own) when conn's client closes or resets the
// connection. It answers the registration to unwatch before conn is closed on this side, 0 when
// conn is watched by reading.
func watchDeparture(conn net.Conn, s *sseStream) uint64 {
	d := watchDepartures()
	sc, ok := conn.(syscall.Conn)
	if d == nil || !ok {
		watchByReading(conn, s)
		return 0
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		watchByReading(conn, s)
		return 0
	}
	d.mu.Lock()
	d.next++
	id := d.next
	d.watched[id] = s
	d.mu.Unlock()
	var added error
	err = raw.Control(func(fd uintptr) {
		ev := unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLHUP | unix.EPOLLERR | unix.EPOLLONESHOT,
			Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
		added = unix.EpollCtl(d.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err != nil || added != nil {
		unwatchDeparture(id)
		watchByReading(conn, s)
		return 0
	}
	return id
}

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
