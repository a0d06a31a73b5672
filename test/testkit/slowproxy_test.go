package testkit_test

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/rushgate/rushgate/test/testkit"
)

// A frozen proxy passes on nothing a client sends, however long the client waits for the answer;
// thawed, it passes on what it held, in order, and what follows.
func TestSlowProxy_PassesNothingWhileFrozen(t *testing.T) {
	t.Parallel()
	proxy := testkit.StartSlowProxy(t, echoServer(t))
	conn, err := net.Dial("tcp", proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	echoed := func(within time.Duration, n int) (string, error) {
		_ = conn.SetReadDeadline(time.Now().Add(within))
		buf := make([]byte, n)
		_, err := io.ReadFull(conn, buf)
		return string(buf), err
	}
	if _, err := conn.Write([]byte("before ")); err != nil {
		t.Fatal(err)
	}
	if got, err := echoed(10*time.Second, len("before ")); err != nil || got != "before " {
		t.Fatalf("echo through a thawed proxy: %q, %v", got, err)
	}

	proxy.Freeze()
	if _, err := conn.Write([]byte("held ")); err != nil {
		t.Fatal(err)
	}
	// A pass would show within the wait; a busy runner can only hide one, never invent one.
	if got, err := echoed(200*time.Millisecond, 1); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an answer through a frozen proxy: %q, %v", got, err)
	}
	if _, err := conn.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	proxy.Thaw()
	if got, err := echoed(10*time.Second, len("held after")); err != nil || got != "held after" {
		t.Fatalf("echo of what the frozen proxy held: %q, %v", got, err)
	}
}

// echoServer answers every connection with what it receives, until the test ends.
func echoServer(t *testing.T) string {
	return testkit.ServeTCP(t, func(conn net.Conn) { _, _ = io.Copy(conn, conn) })
}
