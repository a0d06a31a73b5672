package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// privateDatabase is a database server of the test's own, which the test may stop hard and
// start again on the same data.
type privateDatabase struct {
	name  string
	url   string
	stop  func(t *testing.T) // abrupt: no goodbye to the clients
	start func(t *testing.T)
	// signal sends sig to every process of the running server (SIGSTOP freezes it: connections
	// stay open and nothing answers; SIGCONT resumes it).
	signal func(sig syscall.Signal) error
}

// TestDatabaseStoppedMidLoad_AnswersOnly201Or503 stops the database hard while a herd of joins
// runs: every answer is 201 or 503 (never 500, never 429), the server serves again once the
// database is back, and what was committed is consistent, every 201 included.
func TestDatabaseStoppedMidLoad_AnswersOnly201Or503(t *testing.T) {
	for _, newDatabase := range []func(*testing.T) privateDatabase{startPrivatePostgres, startPrivateMariaDB} {
		db := newDatabase(t)
		t.Run(db.name, func(t *testing.T) {
			const (
				crews      = 20
				workers    = 50
				stopAfter  = 40  // answers before the database is stopped
				inCapacity = 200 // no crew fills: every refusal is the outage's
			)
			s := startServer(t, backend{name: db.name, databaseURL: db.url, redisURL: redisURL(t)}, productionTimeouts)
			crewIDs := make([]string, crews)
			for i := range crewIDs {
				crewIDs[i] = s.createCrew(inCapacity)
			}

			// Each worker joins until the stop begins; the joins then in flight straddle it, and
			// once the database is down every worker sends one more, which the outage answers.
			type herdJoin struct {
				crewID, user string
				answer
			}
			var (
				mu            sync.Mutex
				joins         []herdJoin
				answered      atomic.Int32
				stopping      time.Time
				stopStarted   = make(chan struct{})
				stopDone      = make(chan struct{})
				stopOnce      sync.Once
				wg            sync.WaitGroup
				release       = make(chan struct{})
				sentAfterStop atomic.Int32
			)
			join := func(worker, n int) {
				j := herdJoin{crewID: crewIDs[(worker+n)%crews], user: fmt.Sprintf("herd-%d-%d", worker, n)}
				j.answer = s.joinFromAnyGoroutine(j.crewID, j.user, "k")
				mu.Lock()
				joins = append(joins, j)
				mu.Unlock()
				if answered.Add(1) == stopAfter {
					stopOnce.Do(func() {
						stopping = time.Now()
						close(stopStarted)
						db.stop(t)
						close(stopDone)
					})
				}
			}
			started := func() bool {
				select {
				case <-stopStarted:
					return true
				default:
					return false
				}
			}
			for worker := range workers {
				wg.Go(func() {
					<-release
					for n := 0; ; n++ {
						if started() {
							<-stopDone
							sentAfterStop.Add(1)
							join(worker, n)
							return
						}
						join(worker, n)
					}
				})
			}
			close(release)
			wg.Wait()

			statuses := map[int]int{}
			inFlight := 0
			for _, j := range joins {
				a := j.answer
				if a.err != nil {
					t.Fatalf("transport error: %v", a.err)
				}
				statuses[a.status]++
				if a.sent.Before(stopping) && a.at.After(stopping) {
					inFlight++
				}
				if a.status != http.StatusCreated && (a.status != http.StatusServiceUnavailable || a.code != "UNAVAILABLE" || a.retryAfter == "") {
					t.Errorf("want 201, or 503 UNAVAILABLE with Retry-After; got %v", a)
				}
			}
			t.Logf("%d joins, %d in flight when the database was stopped, %d sent once it was down: %v", len(joins), inFlight,
				sentAfterStop.Load(), statuses)
			if statuses[http.StatusCreated] == 0 || statuses[http.StatusServiceUnavailable] == 0 {
				t.Fatalf("the stop did not land mid-load: %v", statuses)
			}

			db.start(t)
			testkit.Eventually(t, 30*time.Second, "the server joins again", func() error {
				if a := s.joinFromAnyGoroutine(crewIDs[0], "after-restart", "k"); a.status != http.StatusCreated {
					return fmt.Errorf("join: %v", a)
				}
				return nil
			})
			for i, crewID := range crewIDs {
				st := s.stored(crewID)
				if st.currentMembers != st.members || st.members != st.distinctUsers {
					t.Errorf("crew %d inconsistent after the outage: %+v", i, st)
				}
			}
			for _, j := range joins {
				if j.status == http.StatusCreated && !s.isMember(j.crewID, j.user) {
					t.Errorf("%s heard 201 but is not a member", j.user)
				}
			}
		})
	}
}

// isMember reads the membership straight from the database.
func (s *server) isMember(crewID, userID string) bool {
	s.t.Helper()
	var n int
	q := s.query("SELECT COUNT(*) FROM crew_members WHERE crew_id = ? AND user_id = ?")
	if err := s.db.QueryRow(q, crewID, userID).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n == 1
}

// startPrivatePostgres initialises and starts a Postgres cluster in a temporary directory on a
// free port, run as the postgres user when the test runs as root (Postgres refuses root).
func startPrivatePostgres(t *testing.T) privateDatabase {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		testenv.Unreachable(t, "postgres server binaries", fmt.Errorf("no /usr/lib/postgresql/*/bin/pg_ctl"))
	}
	slices.Sort(bins)
	bin := filepath.Dir(bins[len(bins)-1])
	dir := privateDir(t, "rushgate-pg-", "postgres")
	data := filepath.Join(dir, "data")
	run := func(t *testing.T, name string, args ...string) {
		t.Helper()
		cmd := asUser("postgres", filepath.Join(bin, name), args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	run(t, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	// Chosen only now, just before the server binds it: initdb takes seconds on a loaded
	// machine, during which another process (another run's test) can take a port freed early.
	port := freePort(t)
	start := func(t *testing.T) {
		run(t, "pg_ctl", "-D", data, "-l", filepath.Join(dir, "server.log"), "-w", "start",
			"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", port, dir))
	}
	stop := func(t *testing.T) { run(t, "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop") }
	start(t)
	t.Cleanup(func() {
		_ = asUser("postgres", filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "stop").Run()
	})
	return privateDatabase{
		name:  "postgres",
		url:   fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		stop:  stop,
		start: start,
		signal: func(sig syscall.Signal) error {
			return signalPostgres(filepath.Join(data, "postmaster.pid"), sig)
		},
	}
}

// signalPostgres sends sig to the postmaster named in pidFile, then to each of its children:
// every backend runs in a session of its own, so the postmaster's process group misses them.
// Stopped first, the postmaster forks no backend the list could miss.
func signalPostgres(pidFile string, sig syscall.Signal) error {
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		return err
	}
	postmaster, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil {
		return fmt.Errorf("%s: %w", pidFile, err)
	}
	if err := signalProcess(postmaster, sig); err != nil {
		return err
	}
	children, err := childrenOf(postmaster)
	if err != nil {
		return err
	}
	for _, pid := range children {
		// A backend that exited meanwhile has nothing left to signal.
		if err := signalProcess(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
	}
	return nil
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var children []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fields, err := statFields(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited since the listing
		}
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			children = append(children, child)
		}
	}
	return children, nil
}

// startPrivateMariaDB initialises and starts a MariaDB server in a temporary directory on a free
// port; stopping it is SIGKILL.
func startPrivateMariaDB(t *testing.T) privateDatabase {
	t.Helper()
	return startPrivateMariaDBWith(t)
}

// startPrivateMariaDBWith is startPrivateMariaDB with server options added, given to
// mariadb-install-db too: some, such as the system tablespace's files, only take effect on a
// fresh data directory.
func startPrivateMariaDBWith(t *testing.T, options ...string) privateDatabase {
	t.Helper()
	install, err := exec.LookPath("mariadb-install-db")
	if err != nil {
		testenv.Unreachable(t, "mariadb-install-db binary", err)
	}
	server, err := exec.LookPath("mariadbd")
	if err != nil {
		testenv.Unreachable(t, "mariadbd binary", err)
	}
	dir := privateDir(t, "rushgate-mariadb-", "")
	data := filepath.Join(dir, "data")
	asRoot := []string{}
	if os.Geteuid() == 0 {
		asRoot = []string{"--user=root"}
	}
	// A temporary directory of its own: in the shared /tmp, another run's server bootstrapping at
	// the same moment can take the same temporary table names.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	installArgs := append([]string{"--no-defaults", "--datadir=" + data, "--tmpdir=" + tmp,
		"--auth-root-authentication-method=normal", "--skip-test-db"}, append(asRoot, options...)...)
	if out, err := exec.Command(install, installArgs...).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	// Chosen only now, just before the server binds it: mariadb-install-db takes seconds on a
	// loaded machine, during which another process (another run's test) can take a port freed
	// early.
	port := freePort(t)
	var process *os.Process
	start := func(t *testing.T) {
		args := append([]string{"--no-defaults", "--datadir=" + data, "--tmpdir=" + tmp, "--socket=" + filepath.Join(dir, "sock"),
			"--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1", "--skip-log-bin",
			"--innodb-buffer-pool-size=32M", "--innodb-flush-log-at-trx-commit=2"}, append(asRoot, options...)...)
		cmd := exec.Command(server, args...)
		log, err := os.OpenFile(filepath.Join(dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer log.Close()
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		process = cmd.Process
		// Whatever listens on the port answers a dial: another process may have taken it, and
		// then this server, unable to bind, exits. Only this server, by its data directory,
		// counts as started.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := testkit.Poll(30*time.Second, func() error {
			select {
			case <-exited:
				return errStartFailed
			default:
			}
			return isPrivateMariaDB(ctx, port, data)
		}); err != nil {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			t.Fatalf("the private MariaDB on port %d is not up within 30s: %v\n%s", port, err, log)
		}
	}
	stop := func(t *testing.T) {
		if err := process.Kill(); err != nil {
			t.Errorf("kill the private MariaDB: %v", err)
		}
	}
	start(t)
	t.Cleanup(func() { _ = process.Kill() })
	return privateDatabase{
		name:   "mariadb",
		url:    fmt.Sprintf("mysql://root@127.0.0.1:%d/mysql", port),
		stop:   stop,
		start:  start,
		signal: func(sig syscall.Signal) error { return signalProcess(process.Pid, sig) },
	}
}

// errStartFailed is a private server's exit while the test waits for it to start.
var errStartFailed = errors.New("the server exited")

// isPrivateMariaDB checks that the MariaDB answering on port is the one serving datadir.
func isPrivateMariaDB(ctx context.Context, port int, datadir string) error {
	db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/mysql?timeout=1s&readTimeout=1s", port))
	if err != nil {
		return err
	}
	defer db.Close()
	var got string
	if err := db.QueryRowContext(ctx, "SELECT @@datadir").Scan(&got); err != nil {
		return err
	}
	if filepath.Clean(got) != filepath.Clean(datadir) {
		return fmt.Errorf("port %d is served from %s, not this test's %s", port, got, datadir)
	}
	return nil
}

// privateDir makes a temporary directory removed after the test, owned by owner when the test
// runs as root and owner is not empty.
func privateDir(t *testing.T, prefix, owner string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if owner != "" && os.Geteuid() == 0 {
		u, err := user.Lookup(owner)
		if err != nil {
			testenv.Unreachable(t, owner+" user", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// asUser runs name as the given user when the test runs as root, else as the test's own user.
func asUser(owner, name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", owner, "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// freePort returns a TCP port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ports, err := testenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return ports[0]
}
