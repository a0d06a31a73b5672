package testenv

import (
	"net"
	"sync"
	"testing"
)

// SilentServer listens on 127.0.0.1 and accepts connections without ever answering, as a
// frozen server does, until the test ends. It returns the http:// URL of the listener.
func SilentServer(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		held   []net.Conn
		closed bool
	)
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		closed = true
		for _, conn := range held {
			_ = conn.Close()
		}
	})
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				_ = conn.Close()
			} else {
				held = append(held, conn)
			}
			mu.Unlock()
		}
	}()
	return "http://" + ln.Addr().String()
}
