//go:build linux

package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The meter finds a server by the port it listens on and charges it the CPU it uses; this test
// process is the server here, so its work is the servers' and none of it the load tool's.
func TestCPUMeter_ChargesTheServerListeningOnTheURLsPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	meter, ok := newCPUMeter([]string{fmt.Sprintf("http://%s", ln.Addr())})
	require.True(t, ok, "a listener on the URL's port")
	assert.Equal(t, map[int]bool{os.Getpid(): true}, meter.servers)

	before := meter.read()
	// Work until this process has used 300 ms of CPU, however busy the machine is.
	start, err := processCPU("/proc/self/stat")
	require.NoError(t, err)
	for n := 0; ; n++ {
		_ = fmt.Sprint(n)
		if n%10000 == 0 {
			used, err := processCPU("/proc/self/stat")
			require.NoError(t, err)
			if used-start >= 300*time.Millisecond {
				break
			}
		}
	}
	after := meter.read()

	assert.GreaterOrEqual(t, after[roleServers]-before[roleServers], 300*time.Millisecond)
	assert.Zero(t, after[roleLoadTool]-before[roleLoadTool], "this process is counted once, as the server")
}

func TestCPUMeter_NoListenerMeansNoMeter(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, ok := newCPUMeter([]string{"http://" + addr})
	assert.False(t, ok)
}

// A process name may hold spaces and parentheses; the CPU fields are counted after its last ")".
func TestProcessCPU_ReadsUserAndSystemTimeAfterTheName(t *testing.T) {
	stat := filepath.Join(t.TempDir(), "stat")
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime …
	require.NoError(t, os.WriteFile(stat, []byte("4242 (rg (load) 1) S 1 4242 4242 0 -1 4194560 10 0 0 0 150 50 0 0 20 0 3 0\n"), 0o600))
	used, err := processCPU(stat)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, used, "150 + 50 ticks of 1/100 s")

	require.NoError(t, os.WriteFile(stat, []byte("4242 (short) S 1 2\n"), 0o600))
	_, err = processCPU(stat)
	assert.Error(t, err)
}
