package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rushgate/rushgate/test/testkit"
)

// signalProcess sends sig to the process pid. SIGSTOP returns once every thread of it has
// stopped: the kernel stops a process only once the one thread it woke to take the signal runs,
// and on a loaded runner that thread can wait for a CPU while the others go on (a dispatcher
// promoting, a database answering, a postmaster forking), after the test believes it frozen.
func signalProcess(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(pid, sig); err != nil || sig != syscall.SIGSTOP {
		return err
	}
	return testkit.Poll(10*time.Second, func() error { return threadsStopped(pid) })
}

// threadsStopped is nil once every thread of pid is stopped (state T in /proc) or has exited (a
// zombie, Z, that the frozen parent cannot reap, or gone).
func threadsStopped(pid int) error {
	tasks := fmt.Sprintf("/proc/%d/task", pid)
	threads, err := os.ReadDir(tasks)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	for _, thread := range threads {
		fields, err := statFields(filepath.Join(tasks, thread.Name(), "stat"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // the thread ended since the listing
		} else if err != nil {
			return err
		}
		if len(fields) == 0 || !strings.Contains("TZX", fields[0]) {
			return fmt.Errorf("thread %s of process %d is not stopped: %v", thread.Name(), pid, fields[:min(1, len(fields))])
		}
	}
	return nil
}

// statFields reads a /proc stat file, "pid (comm) state ppid …", and returns the fields after
// comm (state first): comm may hold spaces and parentheses, so they follow its last ')'.
func statFields(path string) ([]string, error) {
	stat, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])), nil
}
