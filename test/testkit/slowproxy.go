package testkit

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// SlowProxy forwards TCP connections to a server, holding each chunk a client sends for the
// current delay before passing it on: every round trip to the server costs the delay, its
// answers come back at once, and chunks keep their order, so pipelined calls overlap as they
// would on a slow network. A dependency behind it answers, slowly; it never stalls.
type SlowProxy struct {
	addr  string
	delay atomic.Int64 // time.Duration
}

// StartSlowProxy listens on a free local port and forwards every connection to target
// (host:port) until the test ends. The delay starts at 0, so fixtures are made at full speed.
func StartSlowProxy(t testing.TB, target string) *SlowProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &SlowProxy{addr: ln.Addr().String()}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				_ = client.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, client, server)
			mu.Unlock()
			wg.Go(func() { p.delayed(server, client) })
			wg.Go(func() {
				_, _ = io.Copy(client, server)
				_ = client.Close()
				_ = server.Close()
			})
		}
	})
	return p
}

// Addr is the proxy's host:port, to dial instead of the target's.
func (p *SlowProxy) Addr() string { return p.addr }

// SetDelay makes every round trip through the proxy, on open connections too, cost d.
func (p *SlowProxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// delayed copies what the client sends to the server, each chunk once the delay current when it
// arrived has passed, until either side ends; then it closes both.
func (p *SlowProxy) delayed(server, client net.Conn) {
	type chunk struct {
		data []byte
		due  time.Time
	}
	chunks := make(chan chunk, 1024)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := client.Read(buf)
			if n > 0 {
				chunks <- chunk{buf[:n], time.Now().Add(time.Duration(p.delay.Load()))}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		_ = server.Close()
		_ = client.Close()
		for range chunks { // the reader ends now that client is closed
		}
	}()
	for c := range chunks {
		time.Sleep(time.Until(c.due))
		if _, err := server.Write(c.data); err != nil {
			return
		}
	}
}
