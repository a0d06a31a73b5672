//go:build !linux

package http

import "net"

// watchDeparture calls left when conn's client leaves: see watchByReading.
func watchDeparture(conn net.Conn, left func()) (unwatch func()) { return watchByReading(conn, left) }
