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
	watched map[uint64]func()
}

// watchDepartures is the process's departures; nil when epoll is unavailable, and then every
// connection is watched by reading.
var watchDepartures = sync.OnceValue(func() *departures {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		slog.Warn("SSE departures watched by one goroutine per connection: no epoll", "error", err)
		return nil
	}
	d := &departures{epfd: epfd, watched: make(map[uint64]func())}
	go d.run()
	return d
})

// watchDeparture calls left (once, in a goroutine of its own) when conn's client closes or
// resets the connection; unwatch forgets conn, before it is closed on this side.
func watchDeparture(conn net.Conn, left func()) (unwatch func()) {
	d := watchDepartures()
	sc, ok := conn.(syscall.Conn)
	if d == nil || !ok {
		return watchByReading(conn, left)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return watchByReading(conn, left)
	}
	d.mu.Lock()
	d.next++
	id := d.next
	d.watched[id] = left
	d.mu.Unlock()
	unwatch = func() {
		d.mu.Lock()
		delete(d.watched, id)
		d.mu.Unlock()
	}
	var added error
	err = raw.Control(func(fd uintptr) {
		ev := unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLHUP | unix.EPOLLERR | unix.EPOLLONESHOT,
			Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
		added = unix.EpollCtl(d.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err != nil || added != nil {
		unwatch()
		return watchByReading(conn, left)
	}
	return unwatch
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
			left := d.watched[id]
			delete(d.watched, id)
			d.mu.Unlock()
			if left != nil {
				go left()
			}
		}
	}
}
