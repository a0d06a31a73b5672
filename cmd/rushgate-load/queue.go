package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rushgate/rushgate/adapters/gormdb"
)

// queue-pull: the waiting room's pull mode under a crowd. The timed run is the
// entries: every user POSTs /events/{id}/queue once. Then every user polls their status once,
// at the same concurrency: the crowd waiting and polling, timed as the entries are. The
// admission phase follows: users in order of their place poll their status, claim a token when
// ready and return it at once (the simulated checkout), until the whole crowd is admitted. The
// rates, the p50/p99 of each call and the time to admit everyone are reported beside the invariant:
// never more tokens alive than slots (sampled from the operators' view), nobody admitted
// twice, admission in FIFO order up to the slot window. The ceiling is a bare GET /healthz on
// the same servers at the same concurrency (issue 21: entries and polls at ≥ 0.6× of it), the
// floor of any request through the same HTTP stack; redis-benchmark's ZADD is printed too.
//
// Users wait between their entry and their turn without polling, so the server must run with
// RUSHGATE_QUEUE_IDLE_TIMEOUT longer than the whole run (e.g. 30m): at the default 2m a large
// crowd's tail is dropped as abandoned, as designed, and answers NOT_IN_QUEUE.

// newQueuePull is --users entering one pull event of --capacity slots.
func newQueuePull(cfg config) (scenario, error) {
	if cfg.capacity < 1 || cfg.capacity > maxCapacity {
		return nil, fmt.Errorf("queue-pull: --capacity (the slots) must be 1..%d", maxCapacity)
	}
	return &queuePull{users: cfg.users, slots: cfg.capacity}, nil
}

type queuePull struct {
	users, slots int

	// Set by prepare.
	eventID string
	admin   string
	bearers []map[string]string // user i's Authorization header
	// Set by run: each entry's 201 body, read into ranks once the timed run is over, so the
	// load tool's own decoding takes no CPU from the servers it measures (the ceiling's
	// requests decode nothing either).
	entered [][]byte
	// Set by invariant: the place each entry was given.
	ranks []int
	// Set by invariant: the entries' rate, for the comparison with redis-benchmark.
	entriesPerSecond float64
}

var _ scenario = (*queuePull)(nil)

func (s *queuePull) shape() string {
	return fmt.Sprintf("%d users → 1 pull event of %d slots", s.users, s.slots)
}

func (s *queuePull) targets(gormdb.Dialect) []target {
	return []target{
		{measure: measureGoodputRatio, bound: atLeast, limit: queueFloorTarget},
		{measure: measureP99, bound: atMost, limit: 50},
	}
}

// prepare creates the event and mints every user's token.
func (s *queuePull) prepare(ctx context.Context, e *env) error {
	var err error
	if s.admin, err = e.adminToken(); err != nil {
		return fmt.Errorf("mint admin token: %w", err)
	}
	event, err := createByAdmin(ctx, e.api, 0, s.admin, "/admin/events", map[string]any{
		"name": "rushgate-load queue " + e.runID, "seats": s.slots, "slots": s.slots, "mode": "pull",
	})
	if err != nil {
		return fmt.Errorf("create event: %w", err)
	}
	s.eventID = event.ID
	if s.bearers, err = mintUsers(e, s.users); err != nil {
		return err
	}
	s.entered = make([][]byte, s.users)
	return nil
}

// queuePlace is the part of a queue status answer the scenario reads.
type queuePlace struct {
	Status string `json:"status"`
	Rank   int    `json:"rank"`
}

// run enters every user once; an entry succeeds with 201.
func (s *queuePull) run(e *env) work {
	path := eventPath(s.eventID, "/queue")
	return work{n: s.users, do: func(ctx context.Context, i int) attempt {
		a, raw := e.api.post(ctx, i, path, s.bearers[i], nil)
		a.ok = a.status == http.StatusCreated
		if a.ok {
			s.entered[i] = raw
		}
		return a
	}}
}

// admissionPhase is what the poll-claim-return phase measured.
type admissionPhase struct {
	polls, claims, returns []time.Duration
	duration               time.Duration
	admittedTwice          []string
	outOfOrder             int
	failures               []string
	maxHeld                int64           // tokens held at once, counted by the clients
	alive                  admittedSamples // tokens alive at once, sampled from the operators' view
	admitted               int
}

// invariant runs the admission phase and checks it, then the queue the server reports.
func (s *queuePull) invariant(ctx context.Context, e *env, attempts []attempt) (invariantResult, error) {
	entered := 0
	var last time.Duration
	for _, a := range attempts {
		if a.ok {
			entered++
			last = max(last, a.end)
		}
	}
	if last > 0 {
		s.entriesPerSecond = float64(entered) / last.Seconds()
	}
	s.ranks = make([]int, len(s.entered))
	for i, raw := range s.entered {
		var p queuePlace
		if raw != nil && json.Unmarshal(raw, &p) == nil {
			s.ranks[i] = p.Rank
		}
	}
	s.entered = nil
	order := make([]int, 0, len(attempts))
	for i, a := range attempts {
		if a.ok {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return s.ranks[a] - s.ranks[b] })
	polling := s.pollOnce(ctx, e, order)
	pollsPerSecond := polling.stats.perSecond(polling.stats.succeeded)
	// The floor is taken right after the polls, so that all three rates see the machine alike.
	floor := healthzRate(ctx, e, s.users)
	phase := s.admit(ctx, e, order)

	var res invariantResult
	add := func(label string, value int) { res.rows = append(res.rows, invariantRow{label: label, value: value}) }
	ratio := func(label string, perSecond float64) {
		row := invariantRow{label: label, value: int(perSecond), text: "no GET /healthz answered"}
		if floor > 0 {
			row.text = fmt.Sprintf("%.0f ÷ %.0f = %.2f× (target ≥ %.1f×: %s)", perSecond, floor, perSecond/floor,
				queueFloorTarget, passMiss(perSecond/floor >= queueFloorTarget))
		}
		res.rows = append(res.rows, row)
	}
	add("entered (201)", entered)
	ratio("entries/s ÷ GET /healthz/s", s.entriesPerSecond)
	ratio("status polls/s (every user once) ÷ GET /healthz/s", pollsPerSecond)
	add("  status poll p50 µs", int(polling.stats.latency.p50.Microseconds()))
	add("  status poll p99 µs", int(polling.stats.latency.p99.Microseconds()))
	add("admitted (token claimed once)", phase.admitted)
	add("tokens alive at most (sampled)", phase.alive.peak)
	add("tokens held at most (clients)", int(phase.maxHeld))
	add("admission: status polls", len(phase.polls))
	add("admission: status polls per second", int(float64(len(phase.polls))/phase.duration.Seconds()))
	add("admission: claims per second", int(float64(len(phase.claims))/phase.duration.Seconds()))
	for _, l := range []struct {
		name    string
		samples []time.Duration
	}{{"status", phase.polls}, {"claim", phase.claims}, {"return", phase.returns}} {
		lat := summarizeLatencies(l.samples)
		add(l.name+" p50 µs", int(lat.p50.Microseconds()))
		add(l.name+" p99 µs", int(lat.p99.Microseconds()))
	}
	add("time to admit the crowd ms", int(phase.duration.Milliseconds()))

	if phase.admitted != entered {
		res.violations = append(res.violations, fmt.Sprintf("%d of %d entered users were admitted "+
			"(NOT_IN_QUEUE below: the server's RUSHGATE_QUEUE_IDLE_TIMEOUT is shorter than the run)", phase.admitted, entered))
	}
	if phase.alive.peak > s.slots || int(phase.maxHeld) > s.slots {
		res.violations = append(res.violations, fmt.Sprintf("%d tokens alive at once (clients held %d), more than %d slots", phase.alive.peak, phase.maxHeld, s.slots))
	}
	if why := phase.alive.unproven(); why != "" {
		res.violations = append(res.violations, why)
	}
	for _, u := range phase.admittedTwice {
		res.violations = append(res.violations, u+" was admitted twice")
	}
	if phase.outOfOrder > 0 {
		res.violations = append(res.violations, fmt.Sprintf("%d users were admitted ahead of someone more than the slot window and the in-flight requests before them", phase.outOfOrder))
	}
	res.violations = append(res.violations, polling.failures...)
	res.violations = append(res.violations, phase.failures...)
	return res, nil
}

// queueFloorTarget is issue 21's target for entries/s and status polls/s, each ÷ GET /healthz/s
// on the same servers at the same concurrency.
const queueFloorTarget = 0.6

// pollingPhase is what the every-user-polls-once phase measured.
type pollingPhase struct {
	stats    runStats
	failures []string
}

// pollOnce has every entered user, in order of place, poll their status once at the run's
// concurrency; each must answer 200 waiting or ready (nobody has claimed yet). The answers are
// checked once the timed run is over, as the entries' are, so that decoding them takes no CPU
// from the servers it measures.
func (s *queuePull) pollOnce(ctx context.Context, e *env, order []int) pollingPhase {
	path := eventPath(s.eventID, "/queue/status")
	answers := make([][]byte, len(order))
	attempts, elapsed := runConcurrently(ctx, work{n: len(order), do: func(ctx context.Context, k int) attempt {
		i := order[k]
		a, raw := e.api.send(ctx, i, http.MethodGet, path, s.bearers[i], nil)
		answers[k] = raw
		return a
	}}, e.concurrency)
	phase := pollingPhase{stats: statsOf(attempts, elapsed)}
	for k, a := range attempts {
		if a.status == 0 && a.err == nil {
			continue // never sent: ctx ended the run first
		}
		var p queuePlace
		raw := answers[k]
		if a.status != http.StatusOK || json.Unmarshal(raw, &p) != nil || (p.Status != "waiting" && p.Status != "ready") {
			if len(phase.failures) < 10 {
				phase.failures = append(phase.failures, fmt.Sprintf("status of user %d before admission: %d %v %s", order[k], a.status, a.err, snippet(raw)))
			}
		}
	}
	return phase
}

// admit runs the admission phase over the entered users in order of place.
func (s *queuePull) admit(ctx context.Context, e *env, order []int) admissionPhase {
	base := eventPath(s.eventID, "")
	var (
		phase    admissionPhase
		mu       sync.Mutex
		next     atomic.Int64
		held     atomic.Int64
		maxHeld  atomic.Int64
		position atomic.Int64 // admissions so far
		claimed  = make([]atomic.Bool, s.users)
		wg       sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(phase.failures) < 10 {
			phase.failures = append(phase.failures, fmt.Sprintf(format, args...))
		}
	}
	stop := make(chan struct{})
	sampled := make(chan admittedSamples)
	go func() { sampled <- sampleAdmitted(ctx, e, s.admin, s.eventID, stop) }()
	start := time.Now()
	for range min(e.concurrency, len(order)) {
		wg.Go(func() {
			var polls, claims, returns []time.Duration
			defer func() {
				mu.Lock()
				phase.polls = append(phase.polls, polls...)
				phase.claims = append(phase.claims, claims...)
				phase.returns = append(phase.returns, returns...)
				mu.Unlock()
			}()
			for ctx.Err() == nil {
				k := int(next.Add(1) - 1)
				if k >= len(order) {
					return
				}
				i := order[k]
				for ctx.Err() == nil {
					a, raw := e.api.send(ctx, i, http.MethodGet, base+"/queue/status", s.bearers[i], nil)
					polls = append(polls, a.latency)
					var p queuePlace
					if a.status != http.StatusOK || json.Unmarshal(raw, &p) != nil {
						fail("status of user %d: %d %v %s", i, a.status, a.err, snippet(raw))
						break
					}
					if p.Status == "waiting" {
						time.Sleep(time.Millisecond)
						continue
					}
					a, raw = e.api.post(ctx, i, base+"/queue/token", s.bearers[i], nil)
					claims = append(claims, a.latency)
					if a.status == http.StatusConflict && a.code == "NOT_READY" {
						continue
					}
					if a.status != http.StatusCreated {
						fail("claim of user %d: %d %v %s", i, a.status, a.err, snippet(raw))
						break
					}
					if claimed[i].Swap(true) {
						mu.Lock()
						phase.admittedTwice = append(phase.admittedTwice, fmt.Sprint(i))
						mu.Unlock()
					}
					for h := held.Add(1); ; {
						if peak := maxHeld.Load(); h <= peak || maxHeld.CompareAndSwap(peak, h) {
							break
						}
					}
					if at := int(position.Add(1)) - 1; s.ranks[i] > at+s.slots+e.concurrency {
						mu.Lock()
						phase.outOfOrder++
						mu.Unlock()
					}
					held.Add(-1)
					a, raw = e.api.send(ctx, i, http.MethodDelete, base+"/queue/token", s.bearers[i], nil)
					returns = append(returns, a.latency)
					if a.status != http.StatusNoContent {
						fail("return of user %d: %d %v %s", i, a.status, a.err, snippet(raw))
					}
					break
				}
			}
		})
	}
	wg.Wait()
	phase.duration = time.Since(start)
	close(stop)
	phase.alive = <-sampled
	phase.admitted = int(position.Load())
	phase.maxHeld = maxHeld.Load()
	return phase
}

// admittedSamples is what sampleAdmitted saw: the most users admitted at once, and the reads of
// the operators' view that failed, which leave the peak unproven.
type admittedSamples struct {
	peak, taken, failed int
	firstFailure        string
}

// unproven says why the samples cannot bound the admissions, or "" when every read answered.
func (s admittedSamples) unproven() string {
	switch {
	case s.failed > 0:
		return fmt.Sprintf("%d of %d reads of the operators' queue view failed (first: %s)", s.failed, s.taken, s.firstFailure)
	case s.taken == 0:
		return "the operators' queue view was never read"
	}
	return ""
}

// sampleAdmitted reads an event's operators' view every 50 ms until stop and answers the most
// users it saw admitted at once.
func sampleAdmitted(ctx context.Context, e *env, adminToken, eventID string, stop <-chan struct{}) admittedSamples {
	var s admittedSamples
	headers := map[string]string{"Authorization": "Bearer " + adminToken}
	for {
		a, raw := e.api.send(ctx, 0, http.MethodGet, "/admin/events/"+url.PathEscape(eventID)+"/queue", headers, nil)
		var view struct {
			Admitted int `json:"admitted"`
		}
		s.taken++
		if a.status == http.StatusOK && json.Unmarshal(raw, &view) == nil {
			s.peak = max(s.peak, view.Admitted)
		} else if s.failed++; s.failed == 1 {
			s.firstFailure = fmt.Sprintf("%d %v %s", a.status, a.err, snippet(raw))
		}
		select {
		case <-stop:
			return s
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *queuePull) ceilingName() string { return "GET /healthz" }

// ceiling is a bare GET /healthz on the same servers, as many as the users; redis-benchmark's
// ZADD on the servers' Redis is printed beside it, for the Redis under the entries.
func (s *queuePull) ceiling(ctx context.Context, e *env) (work, error) {
	if e.redisURL == "" {
		progress(e.stderr, "queue-pull: no --redis-url (or RUSHGATE_REDIS_URL): redis-benchmark not run\n")
	} else if rps, err := redisBenchmarkZADD(ctx, e.redisURL, e.concurrency, s.users); err != nil {
		progress(e.stderr, "queue-pull: redis-benchmark: %v\n", err)
	} else {
		progress(e.stderr, "queue-pull: redis-benchmark ZADD %.0f/s at c=%d; entries %.0f/s = %.2f× of it\n",
			rps, e.concurrency, s.entriesPerSecond, s.entriesPerSecond/rps)
	}
	return healthzWork(e, s.users), nil
}

// healthzRate is how many GET /healthz the servers answer per second at the run's concurrency,
// n of them: the cost of a bare request through the same server and middleware, against which
// an entry's own work (JWT, Redis, JSON) shows.
func healthzRate(ctx context.Context, e *env, n int) float64 {
	st := statsOf(runConcurrently(ctx, healthzWork(e, n), e.concurrency))
	return st.perSecond(st.succeeded)
}

// benchmarkRate reads "ZADD: 93896.71 requests per second" off redis-benchmark -q.
var benchmarkRate = regexp.MustCompile(`ZADD: ([0-9.]+) requests per second`)

// redisBenchmarkZADD runs redis-benchmark's ZADD test against the Redis at redisURL (one
// server; its host and port) and answers its requests per second.
func redisBenchmarkZADD(ctx context.Context, redisURL string, concurrency, n int) (float64, error) {
	u, err := url.Parse(redisURL)
	if err != nil {
		return 0, err
	}
	args := []string{"-h", u.Hostname(), "-p", u.Port(), "-c", strconv.Itoa(concurrency), "-n", strconv.Itoa(n), "-t", "zadd", "-q"}
	if pass, ok := u.User.Password(); ok {
		args = append(args, "-a", pass)
	}
	out, err := exec.CommandContext(ctx, "redis-benchmark", args...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%w: %s", err, snippet(out))
	}
	m := benchmarkRate.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no ZADD rate in %q", snippet(out))
	}
	return strconv.ParseFloat(string(m[1]), 64)
}
