package main

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A ratio says how far a scenario is from its ceiling, not why. The CPU each process spent per
// request in the same timed run says where the difference goes on a machine whose cores are
// shared by all of them: the servers, the database, Redis and this load tool itself. It is read
// from Linux's /proc around each timed run (elsewhere the report leaves it out), by role:
//   - the servers: the processes listening on the --url ports;
//   - the database and Redis: every process named postgres, mariadbd, mysqld or redis-server,
//     so another job's use of the same services on the machine is counted too;
//   - the load tool: this process alone (queue-push's stream-client processes are not in it).

// cpuRole is a process's part in a run; cpuRoles is their order in the report.
type cpuRole string

const (
	roleServers  cpuRole = "servers"
	roleDatabase cpuRole = "database"
	roleRedis    cpuRole = "redis"
	roleLoadTool cpuRole = "load tool"
)

var cpuRoles = []cpuRole{roleServers, roleDatabase, roleRedis, roleLoadTool}

// roleByName are the roles known by process name (/proc/<pid>/comm).
var roleByName = map[string]cpuRole{
	"postgres": roleDatabase, "mariadbd": roleDatabase, "mysqld": roleDatabase, "redis-server": roleRedis,
}

// clockTicksPerSecond is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on every Linux
// this runs on (reading it needs sysconf, out of reach without cgo).
const clockTicksPerSecond = 100

// cpuTimes is the CPU (user + system) each role's processes had used at one moment.
type cpuTimes map[cpuRole]time.Duration

// cpuMeter reads cpuTimes for the servers at urls.
type cpuMeter struct {
	servers map[int]bool // their pids
}

// newCPUMeter finds the processes listening on the ports of urls; ok is false where /proc
// cannot tell (not Linux), and the report then has no CPU row.
func newCPUMeter(urls []string) (cpuMeter, bool) {
	ports := map[int]bool{}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			return cpuMeter{}, false
		}
		port, err := strconv.Atoi(u.Port())
		if err != nil {
			return cpuMeter{}, false
		}
		ports[port] = true
	}
	pids, err := listeningPIDs(ports)
	if err != nil || len(pids) == 0 {
		return cpuMeter{}, false
	}
	return cpuMeter{servers: pids}, true
}

// read sums the CPU times of every role now.
func (m cpuMeter) read() cpuTimes {
	times := cpuTimes{}
	self := os.Getpid()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		var role cpuRole
		switch {
		case m.servers[pid]:
			role = roleServers
		case pid == self:
			role = roleLoadTool
		default:
			comm, err := os.ReadFile(dir + "/comm")
			if role = roleByName[strings.TrimSpace(string(comm))]; err != nil || role == "" {
				continue
			}
		}
		// A process gone since the listing counts nothing more.
		if used, err := processCPU(dir + "/stat"); err == nil {
			times[role] += used
		}
	}
	return times
}

// processCPU reads utime + stime from a /proc/<pid>/stat file. The process name, field 2, is in
// parentheses and may hold spaces, so the fields are counted after its closing one.
func processCPU(statFile string) (time.Duration, error) {
	stat, err := os.ReadFile(statFile)
	if err != nil {
		return 0, err
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// After the name: state is field 3, utime field 14, stime field 15.
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("%s: %d fields after the name", statFile, len(fields))
	}
	var ticks int64
	for _, f := range []string{fields[utime], fields[stime]} {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", statFile, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicksPerSecond, nil
}

// listeningPIDs are the processes holding a TCP socket that listens on one of ports.
func listeningPIDs(ports map[int]bool) (map[int]bool, error) {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if err := listeningInodes(table, ports, inodes); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
	}
	pids := map[int]bool{}
	if len(inodes) == 0 {
		return pids, nil
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		target, err := os.Readlink(fd)
		if err != nil || !strings.HasPrefix(target, "socket:[") {
			continue
		}
		if inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			pids[pid] = true
		}
	}
	return pids, nil
}

// listeningInodes adds to inodes the socket inode of each listening socket in a /proc/net/tcp
// table whose local port is one of ports.
func listeningInodes(table string, ports map[int]bool, inodes map[string]bool) error {
	f, err := os.Open(table)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	const tcpListen = "0A"
	lines := bufio.NewScanner(f)
	lines.Scan() // the header
	for lines.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		fields := strings.Fields(lines.Text())
		if len(fields) < 10 || fields[3] != tcpListen {
			continue
		}
		_, hexPort, _ := strings.Cut(fields[1], ":")
		if port, err := strconv.ParseInt(hexPort, 16, 32); err == nil && ports[int(port)] {
			inodes[fields[9]] = true
		}
	}
	return lines.Err()
}

// perRequest is the CPU each role used between before and after per one of n requests, in µs.
func perRequest(before, after cpuTimes, n int) map[cpuRole]float64 {
	if n == 0 {
		return nil
	}
	out := make(map[cpuRole]float64, len(cpuRoles))
	for _, role := range cpuRoles {
		out[role] = float64(after[role]-before[role]) / float64(time.Microsecond) / float64(n)
	}
	return out
}
