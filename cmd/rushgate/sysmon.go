package main

import (
	"os"
	"strings"
	"syscall"
)

// slowSysmon is the GODEBUG setting serve runs with. The Go runtime's sysmon thread polls
// every 20 µs again each time an idle process becomes busy, and a server that waits on its
// database and Redis goes idle and busy thousands of times a second, so sysmon's wake-ups took
// a fifth or more of a server's CPU in the load scenarios (golang/go#18236). With a schedtrace interval
// set, sysmon never parks for idleness, so nothing resets its tick, which grows to 10 ms as in
// any busy stretch of a process without the setting. Its cost: the runtime prints a SCHED line
// to stderr each time the machine's uptime passes a multiple of 2^31 ms (24.8 days), and at
// start on a machine up longer than that.
const slowSysmon = "schedtrace=2147483647"

// execWithSlowSysmon starts the running binary again in this process with slowSysmon added to
// GODEBUG, which the runtime reads only as it starts. It returns only when it does not: GODEBUG
// already names schedtrace (an operator's own choice; schedtrace=0 keeps the runtime's default),
// or the exec failed.
func execWithSlowSysmon() error {
	godebug, _ := os.LookupEnv("GODEBUG")
	if namesSchedtrace(godebug) {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if godebug != "" {
		godebug += ","
	}
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") {
			env = append(env, kv)
		}
	}
	return syscall.Exec(exe, os.Args, append(env, "GODEBUG="+godebug+slowSysmon))
}

// namesSchedtrace reports whether a GODEBUG value sets schedtrace, read as the runtime reads it.
func namesSchedtrace(godebug string) bool {
	for setting := range strings.SplitSeq(godebug, ",") {
		if name, _, _ := strings.Cut(setting, "="); name == "schedtrace" {
			return true
		}
	}
	return false
}
