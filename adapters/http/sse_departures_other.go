//go:build !linux

package http

import "net"

// watchDeparture closes s when conn's client leaves: see watchByReading. It answers 0, no
// registration.
func watchDeparture(conn net.Conn, s *sseStream) uint64 {
	watchByReading(conn, s)
	return 0
}

// unwatchDeparture has nothing to forget where watchByReading watches.
func unwatchDeparture(uint64) {}
