package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rgredis "github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/domain/draw"
)

// prequeue-open: the pre-queue at its opening. --users users enter ONE pull event of
// --capacity slots before its opensAt (the timed run: each must be answered prequeue, without a
// rank); the event opens a window after it is created that the run fits in, assuming at least
// prequeueMinEntryRate entries/s. Then prequeueLateUsers users arrive after opensAt, one after
// another, while the invariant watches for the seed to be published: the time from opensAt to it is
// the time until every user has a rank (the placing is one atomic step), against the target of two
// queue ticks (--queue-tick); beside it, the delay the opening server observed
// (rushgate_prequeue_opening_seconds, read off every instance's /metrics), which must count exactly
// one opening. It checks the line against the draw order recomputed from the published seed
// followed by the later arrivals in FIFO order: in full from the servers' Redis when it is known,
// else for a sample through the status route. Then the head of that order and the later arrivals
// claim at once: exactly the slots' worth, the head, are admitted, never more than the slots. The
// ceiling is a bare GET /healthz.

const (
	prequeueMinEntryRate = 500
	prequeueMinWindow    = 15 * time.Second
	prequeueLateUsers    = 64
	prequeueSample       = 1000
	prequeueSeedBound    = time.Minute
)

// newPrequeueOpen is --users entering one pull pre-queue of --capacity slots.
func newPrequeueOpen(cfg config) (scenario, error) {
	if cfg.capacity < 1 || cfg.capacity > maxCapacity {
		return nil, fmt.Errorf("prequeue-open: --capacity (the slots) must be 1..%d", maxCapacity)
	}
	return &prequeueOpen{users: cfg.users, slots: cfg.capacity, tick: cfg.queueTick}, nil
}

type prequeueOpen struct {
	users, slots int
	tick         time.Duration

	// Set by prepare.
	eventID, seedHash string
	opensAt           time.Time
	userIDs           []string
	bearers           []map[string]string
}

var _ scenario = (*prequeueOpen)(nil)

func (s *prequeueOpen) shape() string {
	return fmt.Sprintf("%d users (+%d late) → 1 pull pre-queue of %d slots", s.users, prequeueLateUsers, s.slots)
}

func (s *prequeueOpen) targets(gormdb.Dialect) []target {
	return []target{
		{measure: measureGoodputRatio, bound: atLeast, limit: 0.25},
		{measure: measureP99, bound: atMost, limit: 300},
	}
}

// prepare creates the event with its pre-queue and mints every user's token.
func (s *prequeueOpen) prepare(ctx context.Context, e *env) error {
	admin, err := e.adminToken()
	if err != nil {
		return fmt.Errorf("mint admin token: %w", err)
	}
	window := max(prequeueMinWindow, time.Duration(s.users)*time.Second/prequeueMinEntryRate)
	s.opensAt = time.Now().Add(window).UTC()
	event, err := createCommitted(ctx, e.api, admin, "/admin/events", map[string]any{
		"name": "rushgate-load pre-queue " + e.runID, "seats": s.slots, "slots": s.slots, "mode": "pull",
		"opensAt": s.opensAt.Format(time.RFC3339Nano), "prequeue": "shuffle"})
	if err != nil {
		return fmt.Errorf("create event: %w", err)
	}
	s.eventID, s.seedHash = event.ID, event.SeedHash
	progress(e.stderr, "prequeue-open: event %s opens at %s (in %v)\n", s.eventID, s.opensAt.Format(time.RFC3339), window)
	s.userIDs = e.userIDs(s.users + prequeueLateUsers)
	s.bearers, err = mintUsers(e, len(s.userIDs))
	return err
}

// run enters every early user; an entry succeeds with 201 prequeue and no rank.
func (s *prequeueOpen) run(e *env) work {
	return work{n: s.users, do: func(ctx context.Context, i int) attempt {
		a, raw := e.api.post(ctx, i, eventPath(s.eventID, "/queue"), s.bearers[i], nil)
		var answer struct {
			Status string `json:"status"`
			Rank   *int   `json:"rank"`
		}
		a.ok = a.status == http.StatusCreated && json.Unmarshal(raw, &answer) == nil && answer.Status == "prequeue" && answer.Rank == nil
		return a
	}}
}

// invariant waits for opensAt, sends the later arrivals, waits for the seed and checks the line
// and the admissions against the draw recomputed from it.
func (s *prequeueOpen) invariant(ctx context.Context, e *env, attempts []attempt) (invariantResult, error) {
	var res invariantResult
	add := func(label string, value int) { res.rows = append(res.rows, invariantRow{label: label, value: value}) }
	text := func(label, value string) { res.rows = append(res.rows, invariantRow{label: label, text: value}) }
	violate := func(format string, args ...any) {
		res.violations = append(res.violations, fmt.Sprintf(format, args...))
	}
	var early []string
	for i, a := range attempts {
		if a.ok {
			early = append(early, s.userIDs[i])
		}
	}
	add("users answered prequeue", len(early))
	if len(early) != s.users {
		violate("%d of %d entries were not answered 201 prequeue without a rank", s.users-len(early), s.users)
	}
	if time.Now().After(s.opensAt) {
		violate("the entries ran past opensAt: the window assumes %d entries/s", prequeueMinEntryRate)
	}
	before, err := openingsObserved(ctx, e)
	if err != nil {
		return res, err
	}
	if wait := time.Until(s.opensAt); wait > 0 {
		progress(e.stderr, "prequeue-open: waiting %v for opensAt\n", wait.Round(time.Second))
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(wait):
		}
	}
	// Watched while the later arrivals enter, so their requests do not count in the opening.
	type published struct {
		seed  draw.Seed
		after time.Duration
		err   error
	}
	seedPublished := make(chan published, 1)
	go func() {
		seed, after, err := awaitSeed(ctx, e, s.eventID, s.bearers[0], s.opensAt)
		seedPublished <- published{seed, after, err}
	}()
	late := s.userIDs[s.users:]
	var slowestLate time.Duration
	for i := range late {
		a, raw := e.api.post(ctx, s.users+i, eventPath(s.eventID, "/queue"), s.bearers[s.users+i], nil)
		if a.status != http.StatusCreated {
			violate("a later arrival: %d %s", a.status, snippet(raw))
		}
		slowestLate = max(slowestLate, a.latency)
	}
	add("slowest later arrival ms", int(slowestLate.Milliseconds()))
	p := <-seedPublished
	if p.err != nil {
		return res, p.err
	}
	seed, openedAfter := p.seed, p.after
	text("opensAt → every user ranked (seed published)", fmt.Sprintf("%v (target ≤ two queue ticks, %v: %s)",
		openedAfter.Round(time.Millisecond), 2*s.tick, passMiss(openedAfter <= 2*s.tick)))
	// The opener records the metric just after the opening, which the seed may show first.
	var observed openings
	for deadline := time.Now().Add(openingObservedBound); ; {
		if observed, err = openingsObserved(ctx, e); err != nil {
			return res, err
		}
		if observed.count > before.count || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := observed.count - before.count; n != 1 {
		violate("the servers observed %v openings of the pre-queue (rushgate_prequeue_opening_seconds), want 1", n)
	} else {
		delay := time.Duration((observed.seconds - before.seconds) * float64(time.Second))
		text("opensAt → opened, as the opening server observed it", delay.Round(time.Millisecond).String())
	}
	if seed.Hash() != s.seedHash {
		violate("the published seed does not hash to the seedHash published at creation")
		return res, nil
	}
	want := make([]string, 0, len(early)+len(late))
	for _, entrant := range draw.Order(seed, early) {
		want = append(want, entrant.UserID)
	}
	want = append(want, late...)
	if msg := s.checkLine(ctx, e, want); msg != "" {
		violate("%s", msg)
	} else {
		add("ranks matching the draw order, then FIFO", len(want))
	}
	s.checkAdmissions(ctx, e, want, add, violate)
	return res, nil
}

// openingObservedBound is how long after the seed is published the opening server's metric
// may take to count the opening.
const openingObservedBound = 2 * time.Second

// openings is rushgate_prequeue_opening_seconds summed over the instances: how many pre-queue
// openings they observed, and how late after opensAt in all.
type openings struct{ count, seconds float64 }

func openingsObserved(ctx context.Context, e *env) (openings, error) {
	var o openings
	for _, base := range e.api.urls {
		err := scrapeMetrics(ctx, base, map[string]*float64{
			"rushgate_prequeue_opening_seconds_count": &o.count,
			"rushgate_prequeue_opening_seconds_sum":   &o.seconds,
		})
		if err != nil {
			return o, err
		}
	}
	return o, nil
}

// awaitSeed polls GET /events/{id} until it publishes the seed, and answers it with the time
// since opensAt. Any answer but 200 ends the wait with an error: polled quietly, a failing
// route would pass for a slow opening.
func awaitSeed(ctx context.Context, e *env, eventID string, bearer map[string]string, opensAt time.Time) (draw.Seed, time.Duration, error) {
	for deadline := opensAt.Add(prequeueSeedBound); ; {
		a, raw := e.api.send(ctx, 0, http.MethodGet, eventPath(eventID, ""), bearer, nil)
		if a.err != nil {
			return draw.Seed{}, 0, fmt.Errorf("GET /events/%s %v after opensAt: %w", eventID,
				time.Since(opensAt).Round(time.Millisecond), a.err)
		}
		if a.status != http.StatusOK {
			return draw.Seed{}, 0, fmt.Errorf("GET /events/%s %v after opensAt: %d %s", eventID,
				time.Since(opensAt).Round(time.Millisecond), a.status, snippet(raw))
		}
		var v struct {
			Seed string `json:"seed"`
		}
		if json.Unmarshal(raw, &v) == nil && v.Seed != "" {
			after := time.Since(opensAt)
			seed, err := draw.ParseSeed(v.Seed)
			return seed, after, err
		}
		if time.Now().After(deadline) {
			return draw.Seed{}, 0, fmt.Errorf("no seed %v after opensAt: %s", prequeueSeedBound, snippet(raw))
		}
		select {
		case <-ctx.Done():
			return draw.Seed{}, 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// checkLine compares the line with want: all of it from the servers' Redis (the default key
// prefix), else a sample of ranks through the status route; "" when they agree.
func (s *prequeueOpen) checkLine(ctx context.Context, e *env, want []string) string {
	if e.redisURL != "" {
		opts, err := goredis.ParseURL(e.redisURL)
		if err != nil {
			return err.Error()
		}
		client := goredis.NewClient(opts)
		defer client.Close()
		line, err := client.ZRange(ctx, rgredis.WaitingRoomKeyPrefix+"{"+s.eventID+"}:queue", 0, -1).Result()
		if err != nil {
			return fmt.Sprintf("read the line from Redis: %v", err)
		}
		if !slices.Equal(line, want) {
			return fmt.Sprintf("the line in Redis (%d users) is not the draw order then FIFO (%d users)", len(line), len(want))
		}
		return ""
	}
	index := map[string]int{}
	for i, u := range s.userIDs {
		index[u] = i
	}
	sample := slices.Concat(want[:min(prequeueSample/2, len(want))], want[max(0, len(want)-prequeueSample/2):])
	for _, u := range sample {
		a, raw := e.api.send(ctx, index[u], http.MethodGet, eventPath(s.eventID, "/queue/status"), s.bearers[index[u]], nil)
		var p queuePlace
		if a.status != http.StatusOK || json.Unmarshal(raw, &p) != nil || want[p.Rank] != u {
			return fmt.Sprintf("%s's status %d %s is not rank %d", u, a.status, snippet(raw), slices.Index(want, u))
		}
	}
	return ""
}

// checkAdmissions has the head of the line (twice the slots) and the later arrivals claim at
// once: exactly the first slots of the line are admitted.
func (s *prequeueOpen) checkAdmissions(ctx context.Context, e *env, want []string, add func(string, int), violate func(string, ...any)) {
	index := map[string]int{}
	for i, u := range s.userIDs {
		index[u] = i
	}
	claimers := slices.Concat(want[:min(2*s.slots, len(want))], s.userIDs[s.users:])
	attempts, _ := runConcurrently(ctx, work{n: len(claimers), do: func(ctx context.Context, i int) attempt {
		u := index[claimers[i]]
		a, _ := e.api.post(ctx, u, eventPath(s.eventID, "/queue/token"), s.bearers[u], nil)
		a.ok = a.status == http.StatusCreated
		return a
	}}, e.concurrency)
	admitted := 0
	for i, a := range attempts {
		if a.ok {
			admitted++
		}
		if rank := slices.Index(want, claimers[i]); a.ok != (rank < s.slots) {
			violate("%s at rank %d: claim answered %d with %d slots", claimers[i], rank, a.status, s.slots)
			return
		}
	}
	add("admitted by the claim stampede (the line's head)", admitted)
	if admitted > s.slots {
		violate("%d admitted with %d slots", admitted, s.slots)
	}
}

func (s *prequeueOpen) ceilingName() string { return "GET /healthz" }

// ceiling is a bare GET /healthz on the same servers, as many as the run's entries.
func (s *prequeueOpen) ceiling(_ context.Context, e *env) (work, error) {
	return healthzWork(e, s.users), nil
}

// withoutDatabase: nothing is read from the database.
func (s *prequeueOpen) withoutDatabase() {}
