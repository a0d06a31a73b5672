package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// TestMain removes the binary rushgateBinary built, once every test has ended: each run builds
// its own, and a runner's disk would keep every one.
func TestMain(m *testing.M) {
	code := m.Run()
	if binary != "" {
		_ = os.RemoveAll(filepath.Dir(binary))
	}
	os.Exit(code)
}

// rushgateBinary builds cmd/rushgate once per test binary, for tests that need separate
// processes (kill -9 must kill a process, not an fx app in the test's own).
func rushgateBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rushgate-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "rushgate")
		out, err := exec.Command("go", "build", "-o", binary, "../../cmd/rushgate").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// process is one `rushgate serve` of a test.
type process struct {
	url string
	cmd *exec.Cmd
}

// processEnv is what every process of one test shares: the database at databaseURL, one Redis
// and the test's key prefix there (keyPrefix), one secret, testenv's dependency timeouts and lock budget (as testConfig), and the short push
// timings (processHeartbeatTimeout). A later entry of the same variable, appended by a test, wins.
// The pool is small: serve opens all of it at start, and the processes of every test (and of
// another suite beside this one) share one Postgres of 100 connections.
func processEnv(t *testing.T, databaseURL string) []string {
	return []string{
		"RUSHGATE_DB_MAX_OPEN_CONNS=4",
		"RUSHGATE_DB_TIMEOUT=" + testenv.DependencyTimeout.String(),
		"RUSHGATE_REDIS_TIMEOUT=" + testenv.DependencyTimeout.String(),
		"RUSHGATE_LOCK_TTL=" + testenv.LockTTL.String(),
		"RUSHGATE_LOCK_RETRIES=" + strconv.Itoa(testenv.LockRetries),
		"RUSHGATE_DATABASE_URL=" + databaseURL,
		"RUSHGATE_REDIS_URL=" + redisURL(t),
		"RUSHGATE_REDIS_KEY_PREFIX=" + keyPrefix(t),
		"RUSHGATE_JWT_SECRET=" + jwtSecret,
		"RUSHGATE_LOG_LEVEL=error",
		"RUSHGATE_QUEUE_TICK=" + pushTick.String(),
		"RUSHGATE_BROKER_HEARTBEAT_TIMEOUT=" + processHeartbeatTimeout.String(),
		"RUSHGATE_RECONNECT_GRACE=0s",
		"RUSHGATE_DATA_DIR=" + t.TempDir(),
		"PATH=" + os.Getenv("PATH"),
	}
}

// startProcess runs `rushgate serve --role role` and waits until it answers /healthz.
func startProcess(t *testing.T, env []string, name, role string) *process {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(rushgateBinary(t), "serve", "--role", role)
	cmd.Env = append(append([]string{}, env...), "RUSHGATE_ADDR="+addr, "RUSHGATE_INSTANCE_ID="+name)
	// Its logs and any crash report go to t.Log, shown when the test fails.
	cmd.Stdout = testenv.LogWriter(t)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{url: "http://" + addr, cmd: cmd}
	t.Cleanup(p.kill)
	testkit.Eventually(t, 30*time.Second, name+" answers /healthz", func() error {
		// The port was free when chosen, but the process binds it only once its database is
		// open: meanwhile another server (another test's, bound to port 0) can take it, and
		// would answer /healthz while this process, unable to bind, exits.
		if err := listensOn(cmd.Process.Pid, addr); err != nil {
			return err
		}
		res, err := http.Get(p.url + "/healthz")
		if err != nil {
			return err
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", res.StatusCode)
		}
		return nil
	})
	return p
}

// listensOn reports whether process pid holds the listening TCP socket of addr (127.0.0.1:port),
// from /proc: the socket's inode in /proc/net/tcp among the process's open files.
func listensOn(pid int, addr string) error {
	_, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return err
	}
	table, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return err
	}
	local := fmt.Sprintf("0100007F:%04X", port) // 127.0.0.1 as the kernel writes it
	inode := ""
	for _, line := range strings.Split(string(table), "\n")[1:] {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		if f := strings.Fields(line); len(f) > 9 && f[1] == local && f[3] == "0A" { // 0A: LISTEN
			inode = f[9]
		}
	}
	if inode == "" {
		return fmt.Errorf("nothing listens on %s yet", addr)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return fmt.Errorf("process %d: %w", pid, err)
	}
	for _, fd := range fds {
		if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); target == "socket:["+inode+"]" {
			return nil
		}
	}
	return fmt.Errorf("%s is held by another process than %d", addr, pid)
}

// processHeartbeatTimeout is RUSHGATE_BROKER_HEARTBEAT_TIMEOUT of the processes' tests.
const processHeartbeatTimeout = time.Second

// processDatabases are the databases the processes' tests run on, each provisioned in its own
// subtest so a server that is down skips (or, under CI, fails) only that one.
var processDatabases = []struct {
	name  string
	fresh func(testing.TB) testenv.Database
}{{"postgres+redis", testenv.Postgres}, {"mysql+redis", testenv.MySQL}}

// kill is kill -9 (a frozen process dies too): no shutdown hook runs.
func (p *process) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		_ = p.cmd.Wait()
	}
}

// freeze and thaw stop and continue the process (SIGSTOP, SIGCONT): it holds its connections
// but does nothing. freeze returns once the process has stopped (signalProcess).
func (p *process) freeze(t *testing.T) {
	t.Helper()
	if err := signalProcess(p.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("freeze process %d: %v", p.cmd.Process.Pid, err)
	}
}

func (p *process) thaw() { _ = p.cmd.Process.Signal(syscall.SIGCONT) }

// client is a server client for a process, sharing the test's secret.
func (p *process) client(t *testing.T) *server {
	return &server{t: t, url: p.url, tokens: rghttp.NewTokens([]byte(jwtSecret)),
		http: newClient(bootstrap.DefaultConfig().Server.ReadHeaderTimeout), run: newRunID()}
}

// TestPush_TwoBrokersOneDispatcherAsProcesses: users spread over two broker processes are each
// admitted exactly once, through their own broker's stream, FIFO, never more than the slots
// at once, while one dispatcher process promotes and routes.
func TestPush_TwoBrokersOneDispatcherAsProcesses(t *testing.T) {
	env := processEnv(t, testenv.Postgres(t).URL)
	startProcess(t, env, "dispatcher", "dispatcher")
	brokers := []*server{
		startProcess(t, env, "broker-a", "broker").client(t),
		startProcess(t, env, "broker-b", "broker").client(t),
	}
	const users, slots = 24, 4
	admin := brokers[0]
	eventID := admin.createEvent(fmt.Sprintf(`{"name":"two brokers","seats":%d,"slots":%d,"mode":"push"}`, users, slots))
	clients := make([]*sseClient, users)
	for i := range clients {
		clients[i] = brokers[i%2].openStream(eventID, fmt.Sprintf("multi-%s%d", admin.run, i))
	}
	next := 0 // the next user to be admitted, in FIFO order
	for next < users {
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("user %d admitted", next), clients[next].isAdmitted)
		view := admin.queueView(eventID)
		if view.num("admitted") > slots {
			t.Fatalf("more admitted than slots: %s", view.raw)
		}
		for i := next + slots; i < users; i++ {
			if clients[i].token() != "" {
				t.Fatalf("user %d admitted before user %d left a slot", i, next)
			}
		}
		res := brokers[next%2].reserve(eventID, fmt.Sprint(next+1), clients[next].user, clients[next].token())
		if res.status != http.StatusCreated {
			t.Fatalf("user %d reserves: %d %s", next, res.status, res.raw)
		}
		clients[next].close()
		next++
	}
	for i, c := range clients {
		c.checkRanksNeverRise()
		if c.distinctTokens() != 1 {
			t.Errorf("user %d got %d different tokens", i, c.distinctTokens())
		}
	}
	testkit.Eventually(t, 5*time.Second, "the room empties", func() error {
		return admin.queueView(eventID).hasNums(map[string]int{"admitted": 0, "waiting": 0, "connections": 0})
	})
	if v := admin.queueView(eventID); v.num("claims") != users || v.num("remainingSeats") != 0 {
		t.Fatalf("claims: %s", v.raw)
	}
}

// TestPush_ANewerStreamOnAnotherBrokerReplacesTheOlder: a user waiting on broker A opens the
// same event's stream on broker B (another tab through the load balancer): A's stream is told
// `replaced` through A's dispatch stream on Redis and ends, B's holds the place and is admitted
// once a slot comes back.
func TestPush_ANewerStreamOnAnotherBrokerReplacesTheOlder(t *testing.T) {
	env := processEnv(t, testenv.Postgres(t).URL)
	startProcess(t, env, "dispatcher", "dispatcher")
	a, b := startProcess(t, env, "broker-a", "broker").client(t), startProcess(t, env, "broker-b", "broker").client(t)
	eventID := a.createEvent(`{"name":"two tabs","seats":5,"slots":1,"mode":"push"}`)
	head := a.openStream(eventID, "head-"+a.run)
	testkit.Eventually(t, 10*time.Second, "the head admitted", head.isAdmitted)
	user := "tabs-" + a.run
	onA := a.openStream(eventID, user)
	testkit.Eventually(t, 10*time.Second, "the user waits on broker A", func() error { return onA.isAtRank(0) })
	onB := b.openStream(eventID, user)
	testkit.Eventually(t, 10*time.Second, "broker A's stream told it was replaced, and ended", func() error {
		select {
		case <-onA.ended:
			onA.mu.Lock()
			defer onA.mu.Unlock()
			if !onA.replaced {
				return errors.New("it ended without being told")
			}
			return nil
		default:
			return errors.New("still open")
		}
	})
	head.close()
	testkit.Eventually(t, 10*time.Second, "broker B's stream admitted", onB.isAdmitted)
}

// TestPush_KilledBrokerGivesEverySlotBack: broker A holds an admitted user, a promoted user
// whose admission it never delivered (A is frozen, then killed with kill -9) and a waiting user.
// After the heartbeat timeout both slots are back, A's waiting user is gone, and broker B's
// user is admitted.
func TestPush_KilledBrokerGivesEverySlotBack(t *testing.T) {
	env := processEnv(t, testenv.Postgres(t).URL)
	startProcess(t, env, "dispatcher", "dispatcher")
	procA := startProcess(t, env, "broker-a", "broker")
	a, b := procA.client(t), startProcess(t, env, "broker-b", "broker").client(t)
	eventID := a.createEvent(`{"name":"kill broker","seats":5,"slots":2,"mode":"push"}`)

	b0 := b.openStream(eventID, "b0-"+a.run)
	testkit.Eventually(t, 5*time.Second, "b0 admitted", b0.isAdmitted)
	a0 := a.openStream(eventID, "a0-"+a.run)
	testkit.Eventually(t, 5*time.Second, "a0 admitted", a0.isAdmitted)
	a1 := a.openStream(eventID, "a1-"+a.run)
	a.openStream(eventID, "a2-"+a.run)
	b1 := b.openStream(eventID, "b1-"+a.run)
	testkit.Eventually(t, 3*time.Second, "three waiting", func() error {
		return a.queueView(eventID).hasNums(map[string]int{"waiting": 3})
	})

	// A stops reading its dispatch stream; b0 leaves, so a1 is promoted and routed to A, which
	// never delivers it.
	procA.freeze(t)
	b0.close()
	testkit.Eventually(t, 5*time.Second, "a1 promoted", func() error {
		return b.queueView(eventID).hasNums(map[string]int{"admitted": 2, "waiting": 2})
	})
	if a1.token() != "" {
		t.Fatal("a frozen broker delivered an admission")
	}
	procA.kill()

	testkit.Eventually(t, 10*time.Second, "b1 admitted after A's slots came back", b1.isAdmitted)
	testkit.Eventually(t, 5*time.Second, "A's users gone", func() error {
		return b.queueView(eventID).hasNums(map[string]int{"admitted": 1, "waiting": 0, "connections": 1, "remainingSlots": 1})
	})
	if res := b.reserve(eventID, "1", a0.user, a0.token()); res.status != http.StatusForbidden {
		t.Fatalf("dead broker's admitted user still reserves: %d %s", res.status, res.raw)
	}
	if v := b.queueView(eventID); v.num("claims") != 4 {
		t.Fatalf("claims (b0, a0, a1, b1): %s", v.raw)
	}
}

// TestPush_KilledDispatcherPromotesNobodyTwice: dispatchers are killed with kill -9 again and
// again, each soon after it has begun promoting, while users stream in and leave; their
// successors resume from the pending entries, and every user is admitted exactly once, with one
// token.
func TestPush_KilledDispatcherPromotesNobodyTwice(t *testing.T) {
	env := processEnv(t, testenv.Postgres(t).URL)
	broker := startProcess(t, env, "broker", "broker").client(t)
	const users, slots = 40, 5
	eventID := broker.createEvent(fmt.Sprintf(`{"name":"kill dispatcher","seats":%d,"slots":%d,"mode":"push"}`, users, slots))
	clients := make([]*sseClient, users)
	for i := range clients {
		clients[i] = broker.openStream(eventID, fmt.Sprintf("kd-%s%d", broker.run, i))
	}
	// Admitted users leave at once, so promotions keep coming while dispatchers die.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for left := 0; left < users; {
			left = 0
			for _, c := range clients {
				if c.token() != "" {
					c.close()
					left++
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	everyoneLeft := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	// Each dispatcher is killed soon after its first promotion, never before it has begun: kills
	// land throughout the run, some mid-promotion, some between ticks, and each successor must
	// pick up where the last one stopped.
	killedWhileUsersRemained := 0
	for round := 0; !everyoneLeft(); round++ {
		promoted := broker.queueView(eventID).num("claims")
		d := startProcess(t, env, fmt.Sprintf("dispatcher-%d", round), "dispatcher")
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("dispatcher %d promotes someone", round), func() error {
			if everyoneLeft() {
				return nil
			}
			if v := broker.queueView(eventID); v.num("claims") <= promoted {
				return fmt.Errorf("no claim since %d: %s", promoted, v.raw)
			}
			return nil
		})
		time.Sleep(time.Duration(round*7%30) * time.Millisecond)
		d.kill()
		if !everyoneLeft() {
			killedWhileUsersRemained++
		}
	}
	t.Logf("%d dispatchers killed while users remained", killedWhileUsersRemained)
	if killedWhileUsersRemained < 3 {
		t.Fatalf("only %d dispatchers were killed while users remained", killedWhileUsersRemained)
	}
	for i, c := range clients {
		if c.distinctTokens() != 1 {
			t.Errorf("user %d got %d different tokens", i, c.distinctTokens())
		}
	}
	if v := broker.queueView(eventID); v.num("claims") != users {
		t.Fatalf("promotions %d for %d users: %s", v.num("claims"), users, v.raw)
	}
}
