package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
)

// soldout: sold-out aware admission under a crowd. --users users enter ONE pull event
// of --capacity seats (slots = seats): the timed run, each entry answered 201. Then the sale, in
// passes: every user still in it polls its status once per pass, at the run's concurrency (the
// pass is as short as the servers allow, so the time to tell is the servers', not a poll
// period's); a ready user claims a token, reserves the next seat nobody was sent to yet and
// returns the token (the checkout), so admission goes on until the last seat is reserved: the
// sold-out moment, when the last 201 reservation arrives. From then on every waiting user must
// be told, by a status 200 {"status":"soldout"} or a claim 409 SOLD_OUT. Reported: the time to
// tell (sold-out moment → each never-admitted user's first sold-out answer) p50/p99/max against
// two queue ticks, and the pass before it. Invariant: reservations == seats, each by a user
// answered 201 (the database, or the seat map through the API); no claim sent after the
// sold-out moment admitted; the room's promotions the same at the moment and at the end, and
// equal to the claims answered 201; every waiting user told; later entries and claims answered
// 409 SOLD_OUT. The ceiling is a bare GET /healthz, as many as the entries.

const (
	// soldoutSaleBudget bounds the sale before the last seat; soldoutTellBudget the telling
	// after it: a user not told by then never was.
	soldoutSaleBudget = 10 * time.Minute
	soldoutTellBudget = time.Minute
	// soldoutLateUsers enter after the sold-out moment; as many told users claim again.
	soldoutLateUsers = 16
)

// newSoldOut is --users waiting for --capacity seats of one pull event.
func newSoldOut(cfg config) (scenario, error) {
	if cfg.capacity < 1 || cfg.capacity > maxCapacity {
		return nil, fmt.Errorf("soldout: --capacity (the seats) must be 1..%d", maxCapacity)
	}
	if cfg.users <= cfg.capacity {
		return nil, fmt.Errorf("soldout: --users %d must exceed --capacity %d, or nobody is left waiting when the seats are gone", cfg.users, cfg.capacity)
	}
	return &soldOut{users: cfg.users, seats: cfg.capacity, tick: cfg.queueTick}, nil
}

type soldOut struct {
	users, seats int
	tick         time.Duration

	// Set by prepare.
	eventID string
	admin   string
	bearers []map[string]string // users, then the late ones
}

var _ scenario = (*soldOut)(nil)

func (s *soldOut) shape() string {
	return fmt.Sprintf("%d users → 1 pull event of %d seats, sold out", s.users, s.seats)
}

func (s *soldOut) targets(gormdb.Dialect) []target {
	return []target{
		{measure: measureGoodputRatio, bound: info},
		{measure: measureP99, bound: atMost, limit: 300},
	}
}

// prepare creates the event and mints every user's token.
func (s *soldOut) prepare(ctx context.Context, e *env) error {
	return s.createSale(ctx, e, map[string]any{
		"name": "rushgate-load sold out " + e.runID, "seats": s.seats, "mode": "pull", "tokenTtl": "1h",
	}, s.users+soldoutLateUsers)
}

// createSale creates the event and mints the tokens of users users.
func (s *soldOut) createSale(ctx context.Context, e *env, event map[string]any, users int) error {
	var err error
	if s.admin, err = e.adminToken(); err != nil {
		return fmt.Errorf("mint admin token: %w", err)
	}
	createdEvent, err := createByAdmin(ctx, e.api, 0, s.admin, "/admin/events", event)
	if err != nil {
		return fmt.Errorf("create event: %w", err)
	}
	s.eventID = createdEvent.ID
	s.bearers, err = mintUsers(e, users)
	return err
}

// run enters every user once; an entry succeeds with 201.
func (s *soldOut) run(e *env) work {
	return work{n: s.users, do: func(ctx context.Context, i int) attempt {
		a, _ := e.api.post(ctx, i, eventPath(s.eventID, "/queue"), s.bearers[i], nil)
		a.ok = a.status == http.StatusCreated
		return a
	}}
}

// saleRecord is what the sale saw, for the checks (problems) and the time to tell.
type saleRecord struct {
	seats     int
	reserved  int       // reservations answered 201
	soldOutAt time.Time // when the last seat's 201 arrived; zero while seats remain
	// toldAt is, for each user never admitted, when its first sold-out answer arrived (zero:
	// never told).
	toldAt []time.Time
	// admittedSent is, for each admission, when it was asked for: the claim answered 201 sent
	// (pull), the promotion (push).
	admittedSent []time.Time
	// waitingAfter counts polls sent after soldOutAt that were answered waiting or ready.
	waitingAfter int
	// claimsAtSoldOut and claimsAtEnd are the room's promotions (the operators' view) read just
	// after soldOutAt and after the sale; claimsAnswered is the claims answered 201.
	claimsAtSoldOut, claimsAtEnd, claimsAnswered int
}

// timesToTell are the never-admitted users' times from soldOutAt to their first sold-out
// answer; an answer that beat the last seat's 201 back (the room is marked before it is sent)
// counts as told at once.
func (r saleRecord) timesToTell() []time.Duration {
	var d []time.Duration
	for _, at := range r.toldAt {
		if !at.IsZero() {
			d = append(d, max(0, at.Sub(r.soldOutAt)))
		}
	}
	return d
}

// problems lists how the sale broke the sold-out rules.
func (r saleRecord) problems() []string {
	var p []string
	if r.soldOutAt.IsZero() {
		return append(p, fmt.Sprintf("never sold out: %d of %d seats reserved", r.reserved, r.seats))
	}
	if r.reserved != r.seats {
		p = append(p, fmt.Sprintf("%d reservations answered 201 for %d seats", r.reserved, r.seats))
	}
	untold := 0
	for _, at := range r.toldAt {
		if at.IsZero() {
			untold++
		}
	}
	if untold > 0 {
		p = append(p, fmt.Sprintf("%d of %d waiting users were never told sold out", untold, len(r.toldAt)))
	}
	late := 0
	for _, sent := range r.admittedSent {
		if sent.After(r.soldOutAt) {
			late++
		}
	}
	if late > 0 {
		p = append(p, fmt.Sprintf("%d admissions after the sold-out moment (a claim sent, or a promotion, after it)", late))
	}
	if r.claimsAtEnd != r.claimsAtSoldOut {
		p = append(p, fmt.Sprintf("the room counted %d promotions at the sold-out moment and %d after the sale", r.claimsAtSoldOut, r.claimsAtEnd))
	}
	if r.claimsAtEnd != r.claimsAnswered {
		p = append(p, fmt.Sprintf("the room counts %d promotions, the claims answered 201 are %d", r.claimsAtEnd, r.claimsAnswered))
	}
	return p
}

// tellVerdict is the time to tell judged against two ticks: "" when nobody was told.
func tellVerdict(times []time.Duration, tick time.Duration) string {
	if len(times) == 0 {
		return ""
	}
	worst := slices.Max(times)
	return fmt.Sprintf("%d ms (target ≤ two queue ticks, %v: %s)", worst.Milliseconds(), 2*tick, passMiss(worst <= 2*tick))
}

// sale is the sale phase's shared state.
type sale struct {
	s *soldOut
	e *env

	nextSeat  atomic.Int64
	soldOut   chan struct{} // closed at the sold-out moment
	mu        sync.Mutex
	rec       saleRecord
	admitted  []bool // user i claimed a token (it leaves the sale after its checkout)
	told      []time.Time
	done      []bool
	buyers    map[string]bool // users answered 201 on a reservation
	failures  []string
	passTimes []time.Duration // each pass before the sold-out moment
}

func (sl *sale) fail(format string, args ...any) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if len(sl.failures) < 10 {
		sl.failures = append(sl.failures, fmt.Sprintf(format, args...))
	}
}

// visit is user i's turn in a pass: a status poll, and the checkout when ready.
func (sl *sale) visit(ctx context.Context, i int) attempt {
	s, e := sl.s, sl.e
	sent := time.Now()
	a, raw := e.api.send(ctx, i, http.MethodGet, eventPath(s.eventID, "/queue/status"), s.bearers[i], nil)
	var p queuePlace
	if a.status != http.StatusOK || json.Unmarshal(raw, &p) != nil {
		sl.fail("status of user %d: %d %v %s", i, a.status, a.err, snippet(raw))
		sl.finish(i, time.Time{})
		return a
	}
	switch p.Status {
	case "soldout":
		sl.finish(i, time.Now())
	case "waiting":
		sl.noteWaiting(sent)
	case "ready":
		sl.noteWaiting(sent)
		sl.checkout(ctx, i)
	default:
		sl.fail("status of user %d in the sale: %s", i, snippet(raw))
		sl.finish(i, time.Time{})
	}
	return a
}

func (sl *sale) noteWaiting(sent time.Time) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if !sl.rec.soldOutAt.IsZero() && sent.After(sl.rec.soldOutAt) {
		sl.rec.waitingAfter++
	}
}

// finish takes user i out of the sale, told sold out at told (zero: not told).
func (sl *sale) finish(i int, told time.Time) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.done[i] = true
	if sl.told[i].IsZero() {
		sl.told[i] = told
	}
}

// checkout claims user i's token, reserves a seat with it and returns it.
func (sl *sale) checkout(ctx context.Context, i int) {
	s, e := sl.s, sl.e
	sent := time.Now()
	a, raw := e.api.post(ctx, i, eventPath(s.eventID, "/queue/token"), s.bearers[i], nil)
	switch {
	case a.status == http.StatusConflict && a.code == "NOT_READY":
		return
	case a.status == http.StatusConflict && a.code == "SOLD_OUT":
		sl.finish(i, time.Now())
		return
	case a.status != http.StatusCreated:
		sl.fail("claim of user %d: %d %v %s", i, a.status, a.err, snippet(raw))
		sl.finish(i, time.Time{})
		return
	}
	var token struct {
		Token string `json:"token"`
	}
	if json.Unmarshal(raw, &token) != nil {
		sl.fail("claim of user %d: %s", i, snippet(raw))
	}
	sl.mu.Lock()
	sl.admitted[i], sl.done[i] = true, true
	sl.rec.admittedSent = append(sl.rec.admittedSent, sent)
	sl.mu.Unlock()
	sl.reserveSeat(ctx, i, token.Token)
	if a, raw := e.api.send(ctx, i, http.MethodDelete, eventPath(s.eventID, "/queue/token"), s.bearers[i], nil); a.status != http.StatusNoContent {
		sl.fail("return of user %d's token: %d %v %s", i, a.status, a.err, snippet(raw))
	}
}

// reserveSeat is admitted user i's reservation with its entry token.
func (sl *sale) reserveSeat(ctx context.Context, i int, token string) {
	s, e := sl.s, sl.e
	// The seats are handed out in turn, each to one buyer; once every seat was handed out, a
	// buyer tries one already taken and must hear 409.
	n := int(sl.nextSeat.Add(1))
	seat := (n-1)%s.seats + 1
	headers := map[string]string{"Authorization": s.bearers[i]["Authorization"], rghttp.EntryTokenHeader: token}
	a, raw := e.api.post(ctx, i, fmt.Sprintf("%s/%d/reservations", eventPath(s.eventID, "/seats"), seat), headers, nil)
	switch a.status {
	case http.StatusCreated:
		sl.reserved(e.userID(i))
	case http.StatusConflict:
	default:
		sl.fail("reservation of seat %d by user %d: %d %v %s", seat, i, a.status, a.err, snippet(raw))
	}
}

// reserved counts a 201 reservation; the last seat's is the sold-out moment.
func (sl *sale) reserved(user string) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.buyers[user] = true
	sl.rec.reserved++
	if sl.rec.reserved == sl.s.seats {
		sl.rec.soldOutAt = time.Now()
		close(sl.soldOut)
	}
}

func (s *soldOut) newSale(e *env) *sale {
	sl := &sale{s: s, e: e, soldOut: make(chan struct{}), admitted: make([]bool, s.users),
		told: make([]time.Time, s.users), done: make([]bool, s.users), buyers: map[string]bool{}}
	sl.rec.seats = s.seats
	return sl
}

// watchSoldOut reads the room's promotions at the sold-out moment; the answered func waits for
// that reading, when the moment came, and ends the watch.
func (sl *sale) watchSoldOut(ctx context.Context) (viewed func()) {
	atSoldOut := make(chan int, 1)
	stop := make(chan struct{})
	go func() {
		select {
		case <-sl.soldOut:
			v, err := sl.s.queueView(ctx, sl.e)
			if err != nil {
				sl.fail("the operators' view at the sold-out moment: %v", err)
			}
			atSoldOut <- v.Claims
		case <-stop:
		}
	}()
	return func() {
		select {
		case <-sl.soldOut:
			sl.rec.claimsAtSoldOut = <-atSoldOut
		default:
		}
		close(stop)
	}
}

// runSale runs passes over the users still in the sale until none is left or its budget ran
// out, and reads the room's promotions at the sold-out moment.
func (s *soldOut) runSale(ctx context.Context, e *env, entered []int) (*sale, error) {
	sl := s.newSale(e)
	for i := range sl.done {
		sl.done[i] = true
	}
	for _, i := range entered {
		sl.done[i] = false
	}
	viewed := sl.watchSoldOut(ctx)
	start := time.Now()
	for ctx.Err() == nil {
		sl.mu.Lock()
		var active []int
		for i, done := range sl.done {
			if !done {
				active = append(active, i)
			}
		}
		soldOutAt := sl.rec.soldOutAt
		sl.mu.Unlock()
		if len(active) == 0 ||
			(soldOutAt.IsZero() && time.Since(start) > soldoutSaleBudget) ||
			(!soldOutAt.IsZero() && time.Since(soldOutAt) > soldoutTellBudget) {
			break
		}
		_, took := runConcurrently(ctx, work{n: len(active), do: func(ctx context.Context, k int) attempt {
			return sl.visit(ctx, active[k])
		}}, e.concurrency)
		if soldOutAt.IsZero() {
			sl.passTimes = append(sl.passTimes, took)
		}
	}
	viewed()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sl.settle(entered)
	return sl, nil
}

// settle records, once the sale is over, when each entered user never admitted was told.
func (sl *sale) settle(entered []int) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	for _, i := range entered {
		if !sl.admitted[i] {
			sl.rec.toldAt = append(sl.rec.toldAt, sl.told[i])
		}
	}
	sl.rec.claimsAnswered = len(sl.rec.admittedSent)
}

// invariant runs the sale and checks it, the room and the reservations.
func (s *soldOut) invariant(ctx context.Context, e *env, attempts []attempt) (invariantResult, error) {
	var res invariantResult
	add := func(label string, value int) { res.rows = append(res.rows, invariantRow{label: label, value: value}) }
	violate := func(format string, args ...any) {
		res.violations = append(res.violations, fmt.Sprintf(format, args...))
	}
	var entered []int
	for i, a := range attempts {
		if a.ok {
			entered = append(entered, i)
		}
	}
	add("entered (201)", len(entered))
	if len(entered) != s.users {
		violate("%d of %d entries were not answered 201", s.users-len(entered), s.users)
	}
	progress(e.stderr, "soldout: the sale, %d users polling in passes at concurrency %d\n", len(entered), e.concurrency)
	sl, err := s.runSale(ctx, e, entered)
	if err != nil {
		return res, err
	}
	end, err := s.queueView(ctx, e)
	if err != nil {
		return res, err
	}
	sl.rec.claimsAtEnd = end.Claims

	passes := summarizeLatencies(sl.passTimes)
	add("sale: passes until the last seat", len(sl.passTimes))
	add("sale: pass (every user polled once) max ms", int(passes.max.Milliseconds()))
	add("polls sent after the last seat answered waiting|ready", sl.rec.waitingAfter)
	if err := sl.report(ctx, end, &res); err != nil {
		return res, err
	}
	s.checkAfter(ctx, e, sl, violate)
	return res, nil
}

// report adds the sale's rows and problems, the room's and the reservations', to res.
func (sl *sale) report(ctx context.Context, end soldOutQueueView, res *invariantResult) error {
	s, e := sl.s, sl.e
	add := func(label string, value int) { res.rows = append(res.rows, invariantRow{label: label, value: value}) }
	text := func(label, value string) { res.rows = append(res.rows, invariantRow{label: label, text: value}) }
	violate := func(format string, args ...any) {
		res.violations = append(res.violations, fmt.Sprintf(format, args...))
	}
	add("admitted (claims answered 201 | tokens sent on a stream)", sl.rec.claimsAnswered)
	add("reservations answered 201", sl.rec.reserved)
	add("waiting users to tell", len(sl.rec.toldAt))
	times := sl.rec.timesToTell()
	add("waiting users told sold out", len(times))
	tell := summarizeLatencies(times)
	add("time to tell p50 ms", int(tell.p50.Milliseconds()))
	add("time to tell p99 ms", int(tell.p99.Milliseconds()))
	if v := tellVerdict(times, s.tick); v != "" {
		text("time to tell max (last seat → every waiting user told)", v)
	}
	add("room promotions at the sold-out moment", sl.rec.claimsAtSoldOut)
	add("room promotions after the sale", sl.rec.claimsAtEnd)
	for _, p := range sl.rec.problems() {
		violate("%s", p)
	}
	if !end.SoldOut || end.RemainingSeats != 0 {
		violate("the operators' view after the sale: soldOut %v, remainingSeats %d", end.SoldOut, end.RemainingSeats)
	}
	res.violations = append(res.violations, sl.failures...)
	rows, problems, err := s.checkReservations(ctx, e, sl.buyers)
	if err != nil {
		return err
	}
	res.rows = append(res.rows, rows...)
	res.violations = append(res.violations, problems...)
	return nil
}

// checkAfter has later arrivals enter and told users claim again: each must hear 409 SOLD_OUT.
func (s *soldOut) checkAfter(ctx context.Context, e *env, sl *sale, violate func(string, ...any)) {
	var told []int
	for i, at := range sl.told {
		if !at.IsZero() && !sl.admitted[i] && len(told) < soldoutLateUsers {
			told = append(told, i)
		}
	}
	for k := range soldoutLateUsers {
		late := s.users + k
		if a, raw := e.api.post(ctx, late, eventPath(s.eventID, "/queue"), s.bearers[late], nil); a.status != http.StatusConflict || a.code != "SOLD_OUT" {
			violate("an entry after the sold-out moment: %d %s", a.status, snippet(raw))
		}
	}
	for _, i := range told {
		if a, raw := e.api.post(ctx, i, eventPath(s.eventID, "/queue/token"), s.bearers[i], nil); a.status != http.StatusConflict || a.code != "SOLD_OUT" {
			violate("a claim by user %d, told sold out: %d %s", i, a.status, snippet(raw))
		}
	}
}

const soldoutReservationUsersSQL = `SELECT user_id FROM reservations WHERE event_id = ?`

// checkReservations reads the reservations back: from the database, or without one the seat
// map through the API. Every seat is reserved once, by a user answered 201.
func (s *soldOut) checkReservations(ctx context.Context, e *env, buyers map[string]bool) ([]invariantRow, []string, error) {
	var problems []string
	if e.db == nil {
		reserved, err := s.reservedSeats(ctx, e)
		if err != nil {
			return nil, nil, err
		}
		if reserved != s.seats {
			problems = append(problems, fmt.Sprintf("the seat map shows %d of %d seats reserved", reserved, s.seats))
		}
		return []invariantRow{{label: "api: seats reserved", value: reserved}}, problems, nil
	}
	d := e.db.Dialect()
	var reservations, distinct, marked int
	if err := e.db.SQL().QueryRowContext(ctx, gormdb.Bind(d, seatReservationsSQL), s.eventID).Scan(&reservations, &distinct); err != nil {
		return nil, nil, fmt.Errorf("invariant: count reservations: %w", err)
	}
	if err := e.db.SQL().QueryRowContext(ctx, gormdb.Bind(d, seatsReservedSQL), s.eventID, true).Scan(&marked); err != nil {
		return nil, nil, fmt.Errorf("invariant: count reserved seats: %w", err)
	}
	rows, err := e.db.SQL().QueryContext(ctx, gormdb.Bind(d, soldoutReservationUsersSQL), s.eventID)
	if err != nil {
		return nil, nil, fmt.Errorf("invariant: read reservations: %w", err)
	}
	defer func() { _ = rows.Close() }() // rows.Err below reports what matters
	strangers := 0
	for rows.Next() {
		var user string
		if err := rows.Scan(&user); err != nil {
			return nil, nil, fmt.Errorf("invariant: read reservations: %w", err)
		}
		if !buyers[user] {
			strangers++
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("invariant: read reservations: %w", err)
	}
	if reservations != s.seats || distinct != s.seats || marked != s.seats {
		problems = append(problems, fmt.Sprintf("%d reservations on %d distinct seats, %d seats marked reserved, for %d seats", reservations, distinct, marked, s.seats))
	}
	if strangers > 0 {
		problems = append(problems, fmt.Sprintf("%d reservations by users not answered 201", strangers))
	}
	return []invariantRow{
		{label: "db: reservations", value: reservations},
		{label: "db: distinct seats reserved", value: distinct},
		{label: "db: seats marked reserved", value: marked},
	}, problems, nil
}

// reservedSeats counts the reserved seats of the event's seat map, page by page.
func (s *soldOut) reservedSeats(ctx context.Context, e *env) (int, error) {
	reserved := 0
	cursor := ""
	for {
		path := eventPath(s.eventID, "/seats") + "?limit=100"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		a, raw := e.api.send(ctx, 0, http.MethodGet, path, s.bearers[0], nil)
		var page struct {
			Items []struct {
				Reserved bool `json:"reserved"`
			} `json:"items"`
			NextCursor *string `json:"nextCursor"`
		}
		if a.err != nil {
			return 0, fmt.Errorf("invariant: seat map: %w", a.err)
		}
		if a.status != http.StatusOK || json.Unmarshal(raw, &page) != nil {
			return 0, fmt.Errorf("invariant: seat map: %d %s", a.status, snippet(raw))
		}
		for _, seat := range page.Items {
			if seat.Reserved {
				reserved++
			}
		}
		if page.NextCursor == nil || *page.NextCursor == "" {
			return reserved, nil
		}
		cursor = *page.NextCursor
	}
}

// soldOutQueueView is the part of the operators' view the scenario reads.
type soldOutQueueView struct {
	Claims         int  `json:"claims"`
	RemainingSeats int  `json:"remainingSeats"`
	SoldOut        bool `json:"soldOut"`
}

func (s *soldOut) queueView(ctx context.Context, e *env) (soldOutQueueView, error) {
	a, raw := e.api.send(ctx, 0, http.MethodGet, "/admin/events/"+url.PathEscape(s.eventID)+"/queue",
		map[string]string{"Authorization": "Bearer " + s.admin}, nil)
	var v soldOutQueueView
	if a.err != nil {
		return v, fmt.Errorf("queue view: %w", a.err)
	}
	if a.status != http.StatusOK || json.Unmarshal(raw, &v) != nil {
		return v, fmt.Errorf("queue view: %d %s", a.status, snippet(raw))
	}
	return v, nil
}

func (s *soldOut) ceilingName() string { return "GET /healthz" }

// ceiling is a bare GET /healthz on the same servers, as many as the entries.
func (s *soldOut) ceiling(_ context.Context, e *env) (work, error) {
	return healthzWork(e, s.users), nil
}

// withoutDatabase: without a database the reservations are read through the seat map.
func (s *soldOut) withoutDatabase() {}
