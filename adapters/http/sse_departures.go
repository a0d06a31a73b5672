package http

import "net"

// watchByReading learns that conn's client left by reading it until the read fails, in a
// goroutine of its own: the way for a connection without a descriptor to watch (a pipe), or on
// a system without epoll. The client has nothing more to send; whatever it sends anyway is
// discarded.
func watchByReading(conn net.Conn, left func()) (unwatch func()) {
	go func() {
		var discard [16]byte
		for {
			if _, err := conn.Read(discard[:]); err != nil {
				break
			}
		}
		left()
	}()
	return func() {} // the read fails once the connection is closed
}
