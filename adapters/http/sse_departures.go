package http

import "net"

// watchByReading learns that conn's client left by reading it until the read fails, in a
// goroutine of its own, and closes s: the way for a connection without a descriptor to watch (a
// pipe), or on a system without epoll. The client has nothing more to send; whatever it sends
// anyway is discarded. It needs no unwatching: the read fails once the connection is closed.
func watchByReading(conn net.Conn, s *sseStream) {
	go func() {
		var discard [16]byte
		for {
			if _, err := conn.Read(discard[:]); err != nil {
				break
			}
		}
		s.close()
	}()
}
