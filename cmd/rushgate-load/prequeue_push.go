package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/domain/draw"
)

// prequeue-open-push: the pre-queue in push mode at its opening. --users SSE streams
// (GET /events/{id}/tickets/waiting, held by stream client processes as queue-push's are) wait
// in ONE push event of --capacity slots before its opensAt: the timed run opens them, each must
// be answered 200. The event opens a window after it is created that the run fits in, assuming
// at least prequeuePushMinOpenRate streams/s. After opensAt prequeueLateUsers more streams open,
// one after another. Measured: the time from opensAt until every pre-queued stream is placed
// (its first position, or its admission for the line's head), p50/p99/max against two queue
// ticks. Checked against the draw order recomputed from the published seed, the later arrivals
// FIFO behind it: each tick's first positions are that order (every stream's place in it minus
// its rank is the tick's one number, the users admitted ahead); then the admitted streams leave
// (the checkout), the servers admit the whole line, and the promotions (each admission's id)
// follow that order; one admission each, never more admitted at once than slots (sampled). The
// servers must run with RUSHGATE_RECONNECT_GRACE=0, as for queue-push. The ceiling is a bare
// GET /healthz.

// prequeuePushMinOpenRate sizes the window before opensAt: streams opened per second at least.
const prequeuePushMinOpenRate = 250

// newPrequeueOpenPush is --users streams in one push pre-queue of --capacity slots.
func newPrequeueOpenPush(cfg config) (scenario, error) {
	if cfg.capacity < 1 || cfg.capacity > maxCapacity {
		return nil, fmt.Errorf("prequeue-open-push: --capacity (the slots) must be 1..%d", maxCapacity)
	}
	return &prequeueOpenPush{users: cfg.users, slots: cfg.capacity, tick: cfg.queueTick}, nil
}

type prequeueOpenPush struct {
	users, slots int
	tick         time.Duration

	// Set by prepare.
	eventID, seedHash, admin string
	opensAt                  time.Time
	userIDs                  []string // the users, then the later arrivals
	bearers                  []map[string]string
	clients                  *streamClients

	// Set by the clients' reports.
	mu      sync.Mutex
	streams []prequeueStream
}

// prequeueStream is what one stream received.
type prequeueStream struct {
	rank     int
	rankTick time.Time // zero: no position received
	rankedAt time.Time
	tokens   map[string]bool
	promoted time.Time // zero: not admitted
	placedAt time.Time // the first position or the admission, whichever came first
	rose     bool
}

var _ scenario = (*prequeueOpenPush)(nil)

func (s *prequeueOpenPush) shape() string {
	return fmt.Sprintf("%d SSE streams (+%d late) → 1 push pre-queue of %d slots", s.users, prequeueLateUsers, s.slots)
}

func (s *prequeueOpenPush) targets(gormdb.Dialect) []target {
	return []target{{measure: measureP99, bound: atMost, limit: 1000}}
}

// prepare creates the event with its pre-queue, mints every user's token and starts the
// stream clients.
func (s *prequeueOpenPush) prepare(ctx context.Context, e *env) error {
	var err error
	if s.admin, err = e.adminToken(); err != nil {
		return fmt.Errorf("mint admin token: %w", err)
	}
	window := max(prequeueMinWindow, time.Duration(s.users)*time.Second/prequeuePushMinOpenRate)
	s.opensAt = time.Now().Add(window).UTC()
	event, err := createCommitted(ctx, e.api, s.admin, "/admin/events", map[string]any{
		"name": "rushgate-load push pre-queue " + e.runID, "seats": s.slots, "slots": s.slots, "mode": "push",
		"opensAt": s.opensAt.Format(time.RFC3339Nano), "prequeue": "shuffle"})
	if err != nil {
		return fmt.Errorf("create event: %w", err)
	}
	s.eventID, s.seedHash = event.ID, event.SeedHash
	progress(e.stderr, "prequeue-open-push: event %s opens at %s (in %v)\n", s.eventID, s.opensAt.Format(time.RFC3339), window)
	n := s.users + prequeueLateUsers
	s.userIDs = e.userIDs(n)
	if s.bearers, err = mintUsers(e, n); err != nil {
		return err
	}
	s.streams = make([]prequeueStream, n)
	for i := range s.streams {
		s.streams[i].tokens = map[string]bool{}
	}
	if s.clients, err = startStreamClients(n, e.timeout, s, e.stderr); err != nil {
		return fmt.Errorf("prequeue-open-push: %w", err)
	}
	progress(e.stderr, "prequeue-open-push: %d streams held by %d client processes\n", n, len(s.clients.procs))
	return nil
}

// open opens user i's stream through the clients.
func (s *prequeueOpenPush) open(e *env, i int) attempt {
	k, base := e.api.pick(i)
	a := s.clients.open(i, base+eventPath(s.eventID, "/tickets/waiting"), s.bearers[i]["Authorization"])
	a.instance = k
	return a
}

// run opens every pre-queued stream; one succeeds when the server answers 200.
func (s *prequeueOpenPush) run(e *env) work {
	return work{n: s.users, do: func(_ context.Context, i int) attempt { return s.open(e, i) }}
}

// The clients' reports (streamEvents).

func (s *prequeueOpenPush) opened(int)                {}
func (s *prequeueOpenPush) positions([]time.Duration) {}

// soldout: the pre-queue's event is never sold out.
func (s *prequeueOpenPush) soldout(int, time.Time, time.Time) {}

func (s *prequeueOpenPush) ranked(i int, tick time.Time, rank int, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.streams[i]
	st.rank, st.rankTick, st.rankedAt = rank, tick, at
	if st.placedAt.IsZero() || at.Before(st.placedAt) {
		st.placedAt = at
	}
}

func (s *prequeueOpenPush) admitted(i int, lag time.Duration, token string, promoted time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.streams[i]
	st.tokens[token] = true
	if st.promoted.IsZero() {
		st.promoted = promoted
	}
	if at := promoted.Add(lag); st.placedAt.IsZero() || at.Before(st.placedAt) {
		st.placedAt = at
	}
}

func (s *prequeueOpenPush) ended(i int, rose bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streams[i].rose = rose
}

// invariant waits for opensAt, opens the later arrivals, waits until every stream is placed and
// the seed is published, checks the line against the draw, then lets the admitted leave until
// everyone was admitted and checks the admissions.
func (s *prequeueOpenPush) invariant(ctx context.Context, e *env, attempts []attempt) (invariantResult, error) {
	defer s.clients.close()
	var res invariantResult
	add := func(label string, value int) { res.rows = append(res.rows, invariantRow{label: label, value: value}) }
	text := func(label, value string) { res.rows = append(res.rows, invariantRow{label: label, text: value}) }
	violate := func(format string, args ...any) {
		res.violations = append(res.violations, fmt.Sprintf(format, args...))
	}
	var opened []int
	var early []string
	for i, a := range attempts {
		if a.ok {
			opened = append(opened, i)
			early = append(early, s.userIDs[i])
		}
	}
	add("streams opened before opensAt (200)", len(opened))
	if len(opened) != s.users {
		violate("%d of %d streams were not answered 200", s.users-len(opened), s.users)
	}
	if time.Now().After(s.opensAt) {
		violate("the streams opened past opensAt: the window assumes %d streams/s", prequeuePushMinOpenRate)
	}
	if wait := time.Until(s.opensAt); wait > 0 {
		progress(e.stderr, "prequeue-open-push: waiting %v for opensAt\n", wait.Round(time.Second))
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(wait):
		}
	}
	// Sampled from opensAt on: the line's head is admitted and held until the release.
	stop := make(chan struct{})
	sampled := make(chan admittedSamples)
	go func() { sampled <- sampleAdmitted(ctx, e, s.admin, s.eventID, stop) }()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
			<-sampled
		}
	}()
	for i := s.users; i < len(s.userIDs); i++ {
		if a := s.open(e, i); !a.ok {
			violate("a later arrival's stream: %d %v %s", a.status, a.err, a.detail)
			continue
		}
		opened = append(opened, i)
	}
	seed, _, err := awaitSeed(ctx, e, s.eventID, s.bearers[0], s.opensAt)
	if err != nil {
		return res, err
	}
	if seed.Hash() != s.seedHash {
		violate("the published seed does not hash to the seedHash published at creation")
		return res, nil
	}
	place := map[string]int{} // each user's place in the line: the draw order, then FIFO
	for k, entrant := range draw.Order(seed, early) {
		place[entrant.UserID] = k
	}
	for k, u := range s.userIDs[s.users:] {
		place[u] = len(early) + k
	}

	placed := s.awaitPlaced(ctx, opened)
	s.mu.Lock()
	var times []time.Duration
	var firsts []firstPosition
	beforeOpen := 0
	for _, i := range opened {
		st := s.streams[i]
		if i < s.users && !st.placedAt.IsZero() {
			times = append(times, max(0, st.placedAt.Sub(s.opensAt)))
		}
		if !st.rankTick.IsZero() {
			broker, _ := e.api.pick(i)
			firsts = append(firsts, firstPosition{place: place[s.userIDs[i]], broker: broker, tick: st.rankTick, rank: st.rank})
			if st.rankTick.Before(s.opensAt) {
				beforeOpen++
			}
		}
	}
	s.mu.Unlock()
	add("pre-queued streams placed (first rank or admission)", len(times))
	lat := summarizeLatencies(times)
	add("opensAt → placed p50 ms", int(lat.p50.Milliseconds()))
	add("opensAt → placed p99 ms", int(lat.p99.Milliseconds()))
	if len(times) > 0 {
		text("opensAt → every stream placed", fmt.Sprintf("%d ms (target ≤ two queue ticks, %v: %s)",
			lat.max.Milliseconds(), 2*s.tick, passMiss(lat.max <= 2*s.tick)))
	}
	if placed < len(opened) {
		violate("%d of %d streams got no rank nor admission within %v of opensAt", len(opened)-placed, len(opened), prequeueSeedBound)
	}
	if beforeOpen > 0 {
		violate("%d streams got a rank at a tick before opensAt", beforeOpen)
	}
	if broken := lineBreaks(firsts); broken > 0 {
		violate("%d of the first positions are not the draw order then FIFO (their place − rank differs within a tick)", broken)
	} else {
		add("first positions in the draw order, then FIFO", len(firsts))
	}
	s.checkAdmissions(ctx, e, opened, place, add, violate)
	close(stop)
	most := <-sampled
	add("admitted at once at most (sampled)", most.peak)
	if most.peak > s.slots {
		violate("%d admitted at once, more than %d slots", most.peak, s.slots)
	}
	if why := most.unproven(); why != "" {
		violate("%s", why)
	}
	return res, nil
}

// awaitPlaced waits until every opened stream has a rank or an admission, or prequeueSeedBound
// after opensAt; it answers how many have.
func (s *prequeueOpenPush) awaitPlaced(ctx context.Context, opened []int) int {
	deadline := s.opensAt.Add(prequeueSeedBound)
	for {
		s.mu.Lock()
		placed := 0
		for _, i := range opened {
			if !s.streams[i].placedAt.IsZero() {
				placed++
			}
		}
		s.mu.Unlock()
		if placed == len(opened) || time.Now().After(deadline) || ctx.Err() != nil {
			return placed
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkAdmissions lets every admitted stream leave, waits until every stream was admitted, and
// checks that the promotions followed the line, one each.
func (s *prequeueOpenPush) checkAdmissions(ctx context.Context, e *env, opened []int, place map[string]int,
	add func(string, int), violate func(string, ...any)) {
	if err := s.clients.release(); err != nil {
		violate("release the admitted streams: %v", err)
	}
	start := time.Now()
	admitted := 0
	for deadline := start.Add(pushAdmissionBudget); ctx.Err() == nil; time.Sleep(50 * time.Millisecond) {
		s.mu.Lock()
		admitted = 0
		for _, i := range opened {
			if !s.streams[i].promoted.IsZero() {
				admitted++
			}
		}
		s.mu.Unlock()
		if admitted == len(opened) || time.Now().After(deadline) {
			break
		}
	}
	took := time.Since(start)
	add("admitted", admitted)
	add("time to admit the line ms", int(took.Milliseconds()))
	if admitted != len(opened) {
		violate("%d of %d streams were admitted within %v", admitted, len(opened), pushAdmissionBudget)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	inLine := make([]time.Time, len(place))
	twice, rose := 0, 0
	for _, i := range opened {
		st := s.streams[i]
		inLine[place[s.userIDs[i]]] = st.promoted
		if len(st.tokens) > 1 {
			twice++
		}
		if st.rose {
			rose++
		}
	}
	if n := admissionInversions(inLine); n > 0 {
		violate("%d admissions were promoted before someone ahead of them in the draw order then FIFO", n)
	} else {
		add("admissions in the draw order, then FIFO", admitted)
	}
	if twice > 0 {
		violate("%d users got more than one token", twice)
	}
	if rose > 0 {
		violate("%d users saw their rank rise", rose)
	}
}

// firstPosition is a stream's first position: its place in the expected line, the instance
// (broker) holding it, the tick (the event's id) and the rank it was given.
type firstPosition struct {
	place  int
	broker int
	tick   time.Time
	rank   int
}

// lineBreaks counts the first positions that break the expected line: in one broker's tick
// (one snapshot) every waiting user's place − rank is the same number (the users admitted
// ahead), so a stream whose difference is not its tick's most common one is out of place.
func lineBreaks(firsts []firstPosition) int {
	type snapshot struct {
		broker int
		tick   time.Time
	}
	offsets := map[snapshot]map[int]int{} // place − rank → streams
	for _, f := range firsts {
		at := snapshot{f.broker, f.tick}
		if offsets[at] == nil {
			offsets[at] = map[int]int{}
		}
		offsets[at][f.place-f.rank]++
	}
	broken := 0
	for _, byOffset := range offsets {
		total, most := 0, 0
		for _, n := range byOffset {
			total += n
			most = max(most, n)
		}
		broken += total - most
	}
	return broken
}

// admissionInversions counts, over the promotions in the order of the expected line (zero: not
// admitted), those promoted before the latest promotion of someone ahead of them.
func admissionInversions(inLine []time.Time) int {
	var latest time.Time
	n := 0
	for _, at := range inLine {
		if at.IsZero() {
			continue
		}
		if at.Before(latest) {
			n++
			continue
		}
		latest = at
	}
	return n
}

func (s *prequeueOpenPush) ceilingName() string { return "GET /healthz" }

// ceiling is a bare GET /healthz on the same servers, as many as the streams.
func (s *prequeueOpenPush) ceiling(_ context.Context, e *env) (work, error) {
	return healthzWork(e, s.users), nil
}

// withoutDatabase: everything is read through the API and the streams.
func (s *prequeueOpenPush) withoutDatabase() {}
