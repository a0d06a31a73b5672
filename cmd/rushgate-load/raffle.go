package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/domain/draw"
)

// raffle-entry: the raffle flow under a stampede. --users users enter ONE raffle of --capacity
// winners; a tenth of them enter a second time in the same run (racing their first entry), so
// the timed work is users × 1.1 entries, each answered 201 (entered) or 200 (the same entry).
// The raffle closes a window after it is created that the run fits in, assuming at least
// raffleMinEntryRate entries/s; then late users try to enter (each must hear RAFFLE_CLOSED),
// the servers' draw worker draws it, and the invariant reads every entry back: no lost entry
// (every user answered 2xx is stored), nobody twice, nothing after the close, exactly
// min(winners, entries) winners, and the draw recomputed from the published seed matches the
// cutoff and a sample of users' own answers. Entries/s are compared with a bare GET /healthz on
// the same servers (the ceiling), target ≥ 0.5×. The report prints the time from closesAt to the
// published draw, and the time the draw's ordering takes for the run's entries and for
// 1,000,000.

const (
	// raffleMinEntryRate sizes the entry window: the raffle closes users ÷ this seconds after
	// it is created (raffleMinWindow at least), so the run ends before it.
	raffleMinEntryRate = 1000
	raffleMinWindow    = 15 * time.Second
	// raffleLateUsers try to enter after the close.
	raffleLateUsers = 64
	// raffleSample is how many users' own standings are read back through the API.
	raffleSample = 200
	// raffleDrawBound is how long after closesAt the draw must be published.
	raffleDrawBound = 2 * time.Minute
)

// newRaffleEntry is --users entering one raffle of --capacity winners.
func newRaffleEntry(cfg config) (scenario, error) {
	if cfg.capacity < 1 {
		return nil, fmt.Errorf("raffle-entry: --capacity (the winners) must be at least 1")
	}
	return &raffleEntry{users: cfg.users, winners: cfg.capacity}, nil
}

type raffleEntry struct {
	users, winners int

	// Set by prepare.
	raffleID string
	seedHash string
	closesAt time.Time
	userIDs  []string
	bearers  []map[string]string
}

var _ scenario = (*raffleEntry)(nil)

func (s *raffleEntry) shape() string {
	return fmt.Sprintf("%d users (+%d entering twice) → 1 raffle of %d winners", s.users, s.users/10, s.winners)
}

func (s *raffleEntry) targets(gormdb.Dialect) []target {
	return []target{
		{measure: measureGoodputRatio, bound: atLeast, limit: 0.5, concurrency: 64},
		{measure: measureP99, bound: atMost, limit: 300},
		{measure: measure429, bound: atMost, limit: 0},
	}
}

// prepare creates the raffle through the API and mints one token per user.
func (s *raffleEntry) prepare(ctx context.Context, e *env) error {
	admin, err := e.adminToken()
	if err != nil {
		return fmt.Errorf("mint admin token: %w", err)
	}
	window := max(raffleMinWindow, time.Duration(s.users)*time.Second/raffleMinEntryRate)
	s.closesAt = time.Now().Add(window).UTC()
	raffle, err := createCommitted(ctx, e.api, admin, "/admin/raffles", map[string]any{
		"name": "rushgate-load " + e.runID, "winners": s.winners, "closesAt": s.closesAt.Format(time.RFC3339Nano)})
	if err != nil {
		return fmt.Errorf("create raffle: %w", err)
	}
	s.raffleID, s.seedHash = raffle.ID, raffle.SeedHash
	progress(e.stderr, "raffle-entry: raffle %s closes at %s (in %v)\n", s.raffleID, s.closesAt.Format(time.RFC3339), window)
	s.userIDs = e.userIDs(s.users + raffleLateUsers)
	s.bearers, err = mintUsers(e, len(s.userIDs))
	return err
}

func (s *raffleEntry) entriesPath() string {
	return "/raffles/" + url.PathEscape(s.raffleID) + "/entries"
}

// userOf is the user request i enters for: every user once, then every tenth user again.
func (s *raffleEntry) userOf(i int) int {
	if i < s.users {
		return i
	}
	return (i - s.users) * 10
}

// run sends every entry; 201 and 200 (the same entry again) both succeed.
func (s *raffleEntry) run(e *env) work {
	return work{n: s.users + s.users/10, do: func(ctx context.Context, i int) attempt {
		a, _ := e.api.post(ctx, i, s.entriesPath(), s.bearers[s.userOf(i)], nil)
		a.ok = a.status == http.StatusCreated || a.status == http.StatusOK
		return a
	}}
}

// raffleView is GET /raffles/{id}.
type raffleView struct {
	Status       string `json:"status"`
	Entries      int    `json:"entries"`
	SeedHash     string `json:"seedHash"`
	Seed         string `json:"seed"`
	CutoffTicket string `json:"cutoffTicket"`
}

// invariant closes the raffle (waits for closesAt), sends the late entries, waits for the draw
// and checks what it published against the answers and the stored entries.
func (s *raffleEntry) invariant(ctx context.Context, e *env, attempts []attempt) (invariantResult, error) {
	var res invariantResult
	add := func(label string, value int) { res.rows = append(res.rows, invariantRow{label: label, value: value}) }
	text := func(label, value string) { res.rows = append(res.rows, invariantRow{label: label, text: value}) }
	violate := func(format string, args ...any) {
		res.violations = append(res.violations, fmt.Sprintf(format, args...))
	}

	accepted := map[string]bool{}
	created := map[string]int{}
	answered, unknown, closedEarly := 0, 0, 0
	var last time.Duration
	for i, a := range attempts {
		user := s.userIDs[s.userOf(i)]
		switch {
		case a.ok:
			answered++
			accepted[user] = true
			last = max(last, a.end)
			if a.status == http.StatusCreated {
				created[user]++
			}
		case a.code == "RAFFLE_CLOSED":
			closedEarly++
		case a.err != nil || a.status >= 500:
			unknown++
		}
	}
	entriesPerSecond := float64(answered) / max(last.Seconds(), 1e-9)
	for user, n := range created {
		if n > 1 {
			violate("%s was answered 201 %d times", user, n)
		}
	}
	if floor := statsOf(runConcurrently(ctx, healthzWork(e, len(attempts)), e.concurrency)); floor.succeeded > 0 {
		healthz := floor.perSecond(floor.succeeded)
		text("entries/s ÷ GET /healthz/s", fmt.Sprintf("%.0f ÷ %.0f = %.2f× (target ≥ 0.5×: %s)", entriesPerSecond, healthz,
			entriesPerSecond/healthz, passMiss(entriesPerSecond/healthz >= 0.5)))
	}

	// The close: every late entry is refused.
	if wait := time.Until(s.closesAt); wait > 0 {
		progress(e.stderr, "raffle-entry: waiting %v for closesAt\n", wait.Round(time.Second))
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(wait):
		}
	}
	late := statsOfLate(ctx, e, s)
	if late != raffleLateUsers {
		violate("%d of %d entries after closesAt were refused RAFFLE_CLOSED", late, raffleLateUsers)
	}

	view, drawnAfter, err := s.awaitDraw(ctx, e)
	if err != nil {
		return res, err
	}
	stored, err := s.storedEntries(ctx, e, accepted)
	if err != nil {
		return res, err
	}
	add("entries answered 2xx (users)", len(accepted))
	add("entries answered 201", len(created))
	add("entries refused before the run ended (RAFFLE_CLOSED)", closedEarly)
	add("late entries refused RAFFLE_CLOSED", late)
	add("entries stored", len(stored))
	add("entries the draw counted", view.Entries)
	text("closesAt → draw published", drawnAfter.Round(time.Millisecond).String())

	distinct := map[string]bool{}
	for _, u := range stored {
		distinct[u] = true
	}
	if len(distinct) != len(stored) {
		violate("%d entries stored for %d users: someone is in twice", len(stored), len(distinct))
	}
	for user := range accepted {
		if !distinct[user] {
			violate("lost entry: %s was answered 2xx and is not stored", user)
			break
		}
	}
	if extra := len(distinct) - len(accepted); extra > unknown {
		violate("%d stored entries were never answered 2xx, more than the %d answers lost to errors", extra, unknown)
	}
	if view.Entries != len(stored) {
		violate("the draw counted %d entries, %d are stored", view.Entries, len(stored))
	}

	seed, err := draw.ParseSeed(view.Seed)
	switch {
	case err != nil:
		violate("published seed: %v", err)
	case seed.Hash() != s.seedHash:
		violate("the published seed does not hash to the seedHash published at creation")
	default:
		start := time.Now()
		order := draw.Order(seed, stored)
		text("draw ordering, this run's entries", time.Since(start).Round(time.Millisecond).String())
		text("draw ordering, 1,000,000 entries", orderingTime(seed, 1000000).Round(time.Millisecond).String())
		won := order[:min(s.winners, len(order))]
		add("winners (recomputed)", len(won))
		if len(won) > 0 && won[len(won)-1].Ticket != view.CutoffTicket {
			violate("the recomputed cutoff %s is not the published %s", won[len(won)-1].Ticket, view.CutoffTicket)
		}
		if mismatches := s.checkStandings(ctx, e, seed, view.CutoffTicket, order); mismatches != "" {
			violate("%s", mismatches)
		}
	}
	return res, nil
}

// statsOfLate sends one entry per late user after the close and counts the RAFFLE_CLOSED answers.
func statsOfLate(ctx context.Context, e *env, s *raffleEntry) int {
	attempts, _ := runConcurrently(ctx, work{n: raffleLateUsers, do: func(ctx context.Context, i int) attempt {
		a, _ := e.api.post(ctx, i, s.entriesPath(), s.bearers[s.users+i], nil)
		return a
	}}, e.concurrency)
	refused := 0
	for _, a := range attempts {
		if a.status == http.StatusConflict && a.code == "RAFFLE_CLOSED" {
			refused++
		}
	}
	return refused
}

// awaitDraw polls the raffle until it is DRAWN and answers it with the time since closesAt.
func (s *raffleEntry) awaitDraw(ctx context.Context, e *env) (raffleView, time.Duration, error) {
	headers := s.bearers[0]
	for deadline := s.closesAt.Add(raffleDrawBound); ; {
		a, raw := e.api.send(ctx, 0, http.MethodGet, "/raffles/"+url.PathEscape(s.raffleID), headers, nil)
		var v raffleView
		if a.status == http.StatusOK && json.Unmarshal(raw, &v) == nil && v.Status == "DRAWN" {
			return v, time.Since(s.closesAt), nil
		}
		if time.Now().After(deadline) {
			return v, 0, fmt.Errorf("raffle-entry: not drawn %v after closesAt: %d %s", raffleDrawBound, a.status, snippet(raw))
		}
		select {
		case <-ctx.Done():
			return v, 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// storedEntries reads the entrants from the database, or, without one, asks each user who was
// answered 2xx through the API (a stored entry nobody heard of is then out of sight).
func (s *raffleEntry) storedEntries(ctx context.Context, e *env, accepted map[string]bool) ([]string, error) {
	if e.db != nil {
		rows, err := e.db.SQL().QueryContext(ctx, gormdb.Bind(e.db.Dialect(), "SELECT user_id FROM raffle_entries WHERE raffle_id = ?"), s.raffleID)
		if err != nil {
			return nil, fmt.Errorf("read entries: %w", err)
		}
		defer rows.Close()
		var users []string
		for rows.Next() {
			var u string
			if err := rows.Scan(&u); err != nil {
				return nil, err
			}
			users = append(users, u)
		}
		return users, rows.Err()
	}
	index := map[string]int{}
	for i, u := range s.userIDs {
		index[u] = i
	}
	var users []string
	for u := range accepted {
		a, _ := e.api.send(ctx, index[u], http.MethodGet, s.entriesPath()+"/me", s.bearers[index[u]], nil)
		if a.status == http.StatusOK {
			users = append(users, u)
		}
	}
	return users, nil
}

// checkStandings reads a sample of users' own standings (the first winners and losers in draw
// order) and compares them with the recomputed tickets; "" when all agree.
func (s *raffleEntry) checkStandings(ctx context.Context, e *env, seed draw.Seed, cutoff string, order []draw.Entrant) string {
	index := map[string]int{}
	for i, u := range s.userIDs {
		index[u] = i
	}
	sample := order[:min(raffleSample/2, len(order))]
	if len(order) > s.winners {
		sample = append(sample, order[s.winners:min(s.winners+raffleSample/2, len(order))]...)
	}
	for _, entrant := range sample {
		i := index[entrant.UserID]
		a, raw := e.api.send(ctx, i, http.MethodGet, s.entriesPath()+"/me", s.bearers[i], nil)
		var standing struct {
			Status string `json:"status"`
			Ticket string `json:"ticket"`
		}
		if a.status != http.StatusOK || json.Unmarshal(raw, &standing) != nil {
			return fmt.Sprintf("%s's standing: %d %s", entrant.UserID, a.status, snippet(raw))
		}
		want := "lost"
		if entrant.Ticket <= cutoff {
			want = "won"
		}
		if standing.Ticket != seed.Ticket(entrant.UserID) || standing.Status != want {
			return fmt.Sprintf("%s's standing %s %s, recomputed %s %s", entrant.UserID, standing.Status, standing.Ticket, want, entrant.Ticket)
		}
	}
	return ""
}

// orderingTime is how long draw.Order takes for n synthetic entrants.
func orderingTime(seed draw.Seed, n int) time.Duration {
	users := make([]string, n)
	for i := range users {
		users[i] = fmt.Sprintf("user-%07d", i)
	}
	start := time.Now()
	draw.Order(seed, users)
	return time.Since(start)
}

func (s *raffleEntry) ceilingName() string { return "GET /healthz" }

// ceiling is a bare GET /healthz on the same servers, as many as the run's entries.
func (s *raffleEntry) ceiling(_ context.Context, e *env) (work, error) {
	return healthzWork(e, s.users+s.users/10), nil
}

// withoutDatabase: against the embedded default the entries are read back through the API.
func (s *raffleEntry) withoutDatabase() {}
