// Package testkit holds the two waits every concurrent test needs, in plain Go so that any test
// can use it, application tests included: StartTogether releases goroutines at one instant, and
// Eventually polls a condition until it holds or a deadline passes, failing with the last state
// it saw (Poll is the same wait for setup code that reports an error instead). SlowProxy puts a
// slow network in front of a dependency: every round trip answered, late. Deadlines records the
// deadline each call of a wrapped port received.
package testkit

import (
	"net"
	"sync"
	"testing"
	"time"
)

// StartTogether runs run(0) … run(n-1) each on its own goroutine, releasing them at one instant
// once all n are started, and returns when every one has returned. A stampede built this way
// meets the code under test all at once instead of trickling in as goroutines are scheduled.
func StartTogether(n int, run func(i int)) {
	var ready, done sync.WaitGroup
	release := make(chan struct{})
	ready.Add(n)
	for i := range n {
		done.Go(func() {
			ready.Done()
			<-release
			run(i)
		})
	}
	ready.Wait()
	close(release)
	done.Wait()
}

// Polling starts this often and backs off to pollCeiling, so a condition that holds at once is
// seen at once and a slow one is not polled in a busy loop.
const (
	pollFloor   = time.Millisecond
	pollCeiling = 50 * time.Millisecond
)

// Poll calls check until it returns nil, and returns nil then, or, once within has passed,
// check's last error: the state it observed last. check describes what it sees in that error
// ("rank 3, want 0"), so a wait that runs out tells what was there. within is a bound for a
// loaded machine, not the expected time: the wait ends as soon as check passes.
func Poll(within time.Duration, check func() error) error {
	deadline := time.Now().Add(within)
	for pause := pollFloor; ; pause = min(2*pause, pollCeiling) {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pause)
	}
}

// Eventually is Poll for a test: it fails t when within passes first, naming what and the last
// state check saw.
func Eventually(t testing.TB, within time.Duration, what string, check func() error) {
	t.Helper()
	if err := Poll(within, check); err != nil {
		t.Fatalf("%s: not within %v; last seen: %v", what, within, err)
	}
}

// ServeTCP listens on a loopback port and runs serve on each connection it accepts, on a
// goroutine of its own, closing the connection after, until the test ends; it returns the
// address.
func ServeTCP(t testing.TB, serve func(conn net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return // closed at cleanup
			}
			go func() {
				defer conn.Close()
				serve(conn)
			}()
		}
	}()
	return ln.Addr().String()
}
