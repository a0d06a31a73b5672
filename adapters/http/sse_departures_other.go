//go:build !linux

package http

import (
	"errors"
	"net"
	"time"
)

// detach keeps every connection a net.Conn here: see the Linux version.
func detach(net.Conn, time.Duration) (int, bool) { return -1, false }

// watchDeparture closes s when c's client leaves: see watchByReading. It answers 0, no
// registration.
func watchDeparture(c streamConn, s *sseStream) uint64 {
	watchByReading(c.conn, s)
	return 0
}

// unwatchDeparture has nothing to forget where watchByReading watches.
func unwatchDeparture(uint64) {}

// No descriptor is ever detached here (detach), so these are never called.
func writeFD(int, []byte) error { return errors.New("no detached descriptors on this system") }
func shutdownFD(int)            {}
func closeFD(int)               {}
