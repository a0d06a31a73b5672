package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rushgate/rushgate/adapters/gormdb"
)

// queue-push: the waiting room's push mode under a crowd of SSE clients. The timed
// run opens --users streams (GET /events/{id}/tickets/waiting) and holds them, in client
// processes of their own (push_clients.go) so that no process runs out of descriptors; the first
// --capacity users are admitted at once and hold their slot until everyone is connected. Then
// every admitted client leaves the moment its token arrives (the simulated checkout), so the
// dispatcher keeps promoting until the whole crowd is through. Reported: connections held,
// broker memory per connection (the process's resident memory growth, and Go heap + stacks, from
// the broker's /metrics, before the crowd connected and once its memory settled while holding
// it), each broker's and client's open files, position lag (the event's id is its tick;
// receipt − tick), admitted
// delivery lag (id = the promotion), promotions/s. Invariant: each user admitted exactly once
// with one token, never more admitted than slots (sampled), FIFO within the slot window,
// positions never rising. The servers must run with RUSHGATE_RECONNECT_GRACE=0, so a leaving
// client's slot comes back at once. The ceiling is a bare GET /healthz on the same instances at
// the same concurrency: what opening a stream costs beyond an HTTP round trip.

// Targets of the issue, checked as report rows.
const (
	pushLagTarget       = time.Second
	pushMemoryTarget    = 2 << 10
	pushAdmissionBudget = 10 * time.Minute
)

func newQueuePush(cfg config) (scenario, error) {
	if cfg.capacity < 1 || cfg.capacity > maxCapacity {
		return nil, fmt.Errorf("queue-push: --capacity (the slots) must be 1..%d", maxCapacity)
	}
	return &queuePush{users: cfg.users, slots: cfg.capacity}, nil
}

type queuePush struct {
	users, slots int

	// Set by prepare.
	eventID string
	admin   string
	bearers []map[string]string
	clients *streamClients
	// memBefore is each instance's memory before the crowd connected.
	memBefore []brokerMem

	// Set by run, from the clients' reports.
	open    atomic.Int64
	maxOpen atomic.Int64

	mu           sync.Mutex
	streams      []*pushStream
	positionLags []time.Duration
	deliveryLags []time.Duration
	admittedSeq  []int // users in order of admission
}

// pushStream is what one stream received.
type pushStream struct {
	tokens map[string]bool
	rose   bool // a position's rank rose above the one before
}

var _ scenario = (*queuePush)(nil)

func (s *queuePush) shape() string {
	return fmt.Sprintf("%d SSE clients → 1 push event of %d slots", s.users, s.slots)
}

func (s *queuePush) targets(gormdb.Dialect) []target {
	return []target{{measure: measureP99, bound: atMost, limit: 1000}}
}

func (s *queuePush) prepare(ctx context.Context, e *env) error {
	var err error
	if s.admin, err = e.adminToken(); err != nil {
		return fmt.Errorf("mint admin token: %w", err)
	}
	event, err := createByAdmin(ctx, e.api, 0, s.admin, "/admin/events", map[string]any{
		"name": "rushgate-load push " + e.runID, "seats": s.slots, "slots": s.slots, "mode": "push",
	})
	if err != nil {
		return fmt.Errorf("create event: %w", err)
	}
	s.eventID = event.ID
	if s.bearers, err = mintUsers(e, s.users); err != nil {
		return err
	}
	s.streams = make([]*pushStream, s.users)
	if s.clients, err = startStreamClients(s.users, e.timeout, s, e.stderr); err != nil {
		return fmt.Errorf("queue-push: %w", err)
	}
	progress(e.stderr, "queue-push: %d streams held by %d client processes\n", s.users, len(s.clients.procs))
	for k := range e.api.urls {
		mem, err := brokerMemory(ctx, e.api.urls[k])
		if err != nil {
			return err
		}
		s.memBefore = append(s.memBefore, mem)
	}
	return nil
}

// Memory settles once the connection burst's garbage is collected and given back to the system
// (Go's scavenger does it in the background): what a held stream costs is read then.
const (
	memorySettlePoll = time.Second
	memorySettleMax  = 30 * time.Second
)

// settledMemory reads an instance's memory every memorySettlePoll until its resident set stops
// falling (less than 1% in a poll) or memorySettleMax passed; it answers the last reading and
// the first resident set (just after the crowd connected).
func settledMemory(ctx context.Context, base string) (settled brokerMem, first float64, err error) {
	if settled, err = brokerMemory(ctx, base); err != nil {
		return settled, 0, err
	}
	first = settled.resident
	for deadline := time.Now().Add(memorySettleMax); time.Now().Before(deadline); {
		time.Sleep(memorySettlePoll)
		next, err := brokerMemory(ctx, base)
		if err != nil {
			return settled, first, err
		}
		falling := next.resident < settled.resident*0.99
		settled = next
		if !falling {
			break
		}
	}
	return settled, first, nil
}

// brokerMem is an instance's memory: Go heap in use + stacks in use, and the process's resident
// set (its VmRSS, as the process collector reads it from /proc); and its open descriptors
// against its limit.
type brokerMem struct{ goHeapStacks, resident, openFiles, maxFiles float64 }

// brokerMemory reads an instance's memory and descriptors off its /metrics.
func brokerMemory(ctx context.Context, base string) (brokerMem, error) {
	var m brokerMem
	err := scrapeMetrics(ctx, base, map[string]*float64{
		"go_memstats_heap_inuse_bytes":  &m.goHeapStacks,
		"go_memstats_stack_inuse_bytes": &m.goHeapStacks,
		"process_resident_memory_bytes": &m.resident,
		"process_open_fds":              &m.openFiles,
		"process_max_fds":               &m.maxFiles,
	})
	return m, err
}

// scrapeMetrics adds the value of each sample of an instance's /metrics named in into (the
// whole sample name, labels included) to its target.
func scrapeMetrics(ctx context.Context, base string, into map[string]*float64) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("read %s/metrics: %w", base, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("read %s/metrics: %s", base, res.Status)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		target, wanted := into[name]
		if !ok || !wanted {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		*target += v
	}
	return sc.Err()
}

// run opens every stream through the clients; one succeeds when the server answers 200 and the
// stream starts.
func (s *queuePush) run(e *env) work {
	path := eventPath(s.eventID, "/tickets/waiting")
	return work{n: s.users, do: func(_ context.Context, i int) attempt {
		k, base := e.api.pick(i)
		a := s.clients.open(i, base+path, s.bearers[i]["Authorization"])
		a.instance = k
		return a
	}}
}

// opened, admitted, ended and positions are the clients' reports (streamEvents).

func (s *queuePush) opened(i int) {
	s.mu.Lock()
	s.streams[i] = &pushStream{tokens: map[string]bool{}}
	s.mu.Unlock()
	for n := s.open.Add(1); ; {
		if peak := s.maxOpen.Load(); n <= peak || s.maxOpen.CompareAndSwap(peak, n) {
			break
		}
	}
}

func (s *queuePush) ended(i int, rose bool) {
	s.open.Add(-1)
	s.mu.Lock()
	s.streams[i].rose = rose
	s.mu.Unlock()
}

func (s *queuePush) positions(lags []time.Duration) {
	s.mu.Lock()
	s.positionLags = append(s.positionLags, lags...)
	s.mu.Unlock()
}

// ranked: queue-push reads the positions' lags only (positions).
func (s *queuePush) ranked(int, time.Time, int, time.Time) {}

// soldout: a queue-push event never sells out.
func (s *queuePush) soldout(int, time.Time, time.Time) {}

func (s *queuePush) admitted(i int, lag time.Duration, token string, _ time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.streams[i]
	if len(st.tokens) == 0 {
		s.admittedSeq = append(s.admittedSeq, i)
	}
	st.tokens[token] = true
	if lag > 0 {
		s.deliveryLags = append(s.deliveryLags, lag)
	}
}

// invariant measures memory with the crowd connected, lets the admitted leave, waits until
// everyone was admitted, and checks the run.
func (s *queuePush) invariant(ctx context.Context, e *env, attempts []attempt) (invariantResult, error) {
	var res invariantResult
	add := func(label string, value int, text string) {
		res.rows = append(res.rows, invariantRow{label: label, value: value, text: text})
	}
	connected := 0
	for _, a := range attempts {
		if a.ok {
			connected++
		}
	}
	add("connections opened (200)", connected, "")
	add("connections held at once (clients)", int(s.maxOpen.Load()), "")
	view, err := s.queueView(ctx, e)
	if err != nil {
		return res, err
	}
	add("connections the server counts", view.Connections, "")
	clientFiles, err := s.clients.mostFiles()
	if err != nil {
		return res, err
	}
	add("client processes", len(s.clients.procs), "")
	add("client process open files at most", clientFiles, fmt.Sprintf("%d (limit %d)", clientFiles, fileLimit()))
	for k := range e.api.urls {
		after, peak, err := settledMemory(ctx, e.api.urls[k])
		if err != nil {
			return res, err
		}
		held := 0
		for i, a := range attempts {
			if a.ok && i%len(e.api.urls) == k {
				held++
			}
		}
		streams := float64(max(held, 1))
		resident := (after.resident - s.memBefore[k].resident) / streams
		goMem := (after.goHeapStacks - s.memBefore[k].goHeapStacks) / streams
		verdict := passMiss(resident < pushMemoryTarget)
		if resident <= 0 {
			// Memory an earlier scenario on the same server gave back hides the streams' growth.
			verdict = "not measured: the resident memory shrank while the streams connected; run queue-push alone on a fresh server"
		}
		add(fmt.Sprintf("broker %d memory per connection", k), int(resident),
			fmt.Sprintf("%.2f KiB (resident memory Δ over %d streams, settled; target < 2 KiB: %s); just connected %.2f KiB; Go heap+stacks Δ %.2f KiB",
				resident/1024, held, verdict, (peak-s.memBefore[k].resident)/streams/1024, goMem/1024))
		add(fmt.Sprintf("broker %d open files", k), int(after.openFiles), fmt.Sprintf("%.0f (limit %.0f)", after.openFiles, after.maxFiles))
	}

	stop := make(chan struct{})
	sampled := make(chan admittedSamples)
	go func() { sampled <- sampleAdmitted(ctx, e, s.admin, s.eventID, stop) }()
	start := time.Now()
	if err := s.clients.release(); err != nil {
		return res, err
	}
	deadline := time.Now().Add(pushAdmissionBudget)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		s.mu.Lock()
		done := len(s.admittedSeq)
		s.mu.Unlock()
		if done >= connected {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(start)
	close(stop)
	maxAdmitted := <-sampled
	s.clients.close()

	s.mu.Lock()
	defer s.mu.Unlock()
	admitted := len(s.admittedSeq)
	add("admitted", admitted, "")
	add("admitted at once at most (sampled)", maxAdmitted.peak, "")
	// The first slots were admitted during the run and waited for the release.
	rate := float64(admitted-min(admitted, s.slots)) / took.Seconds()
	add("promotions per second", int(rate), fmt.Sprintf("%.0f/s after the release (%d in %v)", rate, admitted-min(admitted, s.slots), took.Round(time.Millisecond)))
	posLag := summarizeLatencies(s.positionLags)
	add("position lag p50 ms", int(posLag.p50.Milliseconds()), "")
	add("position lag p99 ms", int(posLag.p99.Milliseconds()),
		fmt.Sprintf("%d ms over %d events (target < 1 s: %s)", posLag.p99.Milliseconds(), len(s.positionLags), passMiss(posLag.p99 < pushLagTarget)))
	delLag := summarizeLatencies(s.deliveryLags)
	add("admitted delivery lag p99 ms", int(delLag.p99.Milliseconds()),
		fmt.Sprintf("%d ms after promotion over %d (target < 1 s: %s)", delLag.p99.Milliseconds(), len(s.deliveryLags), passMiss(delLag.p99 < pushLagTarget)))

	if admitted != connected {
		res.violations = append(res.violations, fmt.Sprintf("%d of %d connected users were admitted within %v", admitted, connected, pushAdmissionBudget))
	}
	if maxAdmitted.peak > s.slots {
		res.violations = append(res.violations, fmt.Sprintf("%d admitted at once, more than %d slots", maxAdmitted.peak, s.slots))
	}
	if why := maxAdmitted.unproven(); why != "" {
		res.violations = append(res.violations, why)
	}
	twice, rose := 0, 0
	for _, st := range s.streams {
		if st == nil {
			continue
		}
		if len(st.tokens) > 1 {
			twice++
		}
		if st.rose {
			rose++
		}
	}
	if twice > 0 {
		res.violations = append(res.violations, fmt.Sprintf("%d users got more than one token", twice))
	}
	if rose > 0 {
		res.violations = append(res.violations, fmt.Sprintf("%d users saw their rank rise", rose))
	}
	// FIFO: entry order is connection order up to the requests in flight; admission may not
	// overtake by more than the slot window and the in-flight connects.
	outOfOrder := 0
	for pos, i := range s.admittedSeq {
		if i > pos+s.slots+e.concurrency {
			outOfOrder++
		}
	}
	if outOfOrder > 0 {
		res.violations = append(res.violations, fmt.Sprintf("%d users admitted ahead of the slot window", outOfOrder))
	}
	final, err := s.queueView(ctx, e)
	if err != nil {
		return res, err
	}
	if final.Claims != admitted {
		res.violations = append(res.violations, fmt.Sprintf("the server counts %d promotions for %d admitted users", final.Claims, admitted))
	}
	return res, nil
}

func passMiss(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

type pushQueueView struct {
	Connections int `json:"connections"`
	Claims      int `json:"claims"`
}

func (s *queuePush) queueView(ctx context.Context, e *env) (pushQueueView, error) {
	a, raw := e.api.send(ctx, 0, http.MethodGet, "/admin/events/"+url.PathEscape(s.eventID)+"/queue",
		map[string]string{"Authorization": "Bearer " + s.admin}, nil)
	var v pushQueueView
	if a.err != nil {
		return v, fmt.Errorf("queue view: %w", a.err)
	}
	if a.status != http.StatusOK || json.Unmarshal(raw, &v) != nil {
		return v, fmt.Errorf("queue view: %d %s", a.status, snippet(raw))
	}
	return v, nil
}

func (s *queuePush) ceilingName() string { return "GET /healthz" }

func (s *queuePush) ceiling(_ context.Context, e *env) (work, error) {
	return healthzWork(e, s.users), nil
}

// healthzWork is n GET /healthz: a bare route through the servers' HTTP stack and middleware.
func healthzWork(e *env, n int) work {
	return work{n: n, do: func(ctx context.Context, i int) attempt {
		a, _ := e.api.send(ctx, i, http.MethodGet, "/healthz", nil, nil)
		a.ok = a.status == http.StatusOK
		return a
	}}
}

// withoutDatabase: queue-push reads everything through the API and the streams.
func (s *queuePush) withoutDatabase() {}
