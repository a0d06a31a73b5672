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
// would on a slow network. A dependency behind it answers, slowly; it stalls only while frozen.
type SlowProxy struct {
	addr  string
	delay atomic.Int64 // time.Duration
	// closed ends the wait of chunks held while frozen when the test ends.
	closed chan struct{}

	mu sync.Mutex
	// thawed is closed while chunks pass, open while the proxy is frozen.
	thawed chan struct{}
}

// StartSlowProxy listens on a free local port and forwards every connection to target
// (host:port) until the test ends. The delay starts at 0, so fixtures are made at full speed.
func StartSlowProxy(t testing.TB, target string) *SlowProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &SlowProxy{addr: ln.Addr().String(), closed: make(chan struct{}), thawed: make(chan struct{})}
	close(p.thawed)
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	t.Cleanup(func() {
		close(p.closed)
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

// Freeze holds everything clients send from now on, and what they sent that was not passed on
// yet, until Thaw: the server answers nothing, as a frozen one would, however long a test
// waits. Connections stay open, and new ones are accepted.
func (p *SlowProxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
		p.thawed = make(chan struct{})
	default: // already frozen
	}
}

// Thaw passes on what Freeze held, each chunk once its delay has passed, and what follows.
func (p *SlowProxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed: // not frozen
	default:
		close(p.thawed)
	}
}

// passing returns a channel closed while chunks pass: at once, unless the proxy is frozen.
func (p *SlowProxy) passing() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.thawed
}

// delayed copies what the client sends to the server, each chunk once the delay current when it
// arrived has passed and the proxy is not frozen, until either side ends; then it closes both.
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
		select {
		case <-p.passing():
		case <-p.closed:
			return
		}
		if _, err := server.Write(c.data); err != nil {
			return
		}
	}
}
