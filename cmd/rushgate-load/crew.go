package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
)

// The crew scenarios: users join crews round-robin, one POST /crews/{id}/join each. They differ
// in shape and in how they are judged.

// maxCapacity is the largest maxMembers a crew may have.
const maxCapacity = 100000

// tokenTTL outlives any run: tokens are minted before timing starts.
const tokenTTL = time.Hour

// newCrewHot is ONE crew with a seat for every user: every join commits, and every join is a
// transaction on the same row. Judged on goodput ÷ the bare hot-row transaction on one crew.
func newCrewHot(cfg config) (scenario, error) {
	if cfg.users > maxCapacity {
		return nil, fmt.Errorf("crew-hot: --users %d: one crew holds at most %d", cfg.users, maxCapacity)
	}
	return &crewJoin{users: cfg.users, crews: 1, capacity: cfg.users, judgedOn: func(d gormdb.Dialect) []target {
		ratio := 2.5 // MySQL/MariaDB
		if d == gormdb.Postgres {
			ratio = 4.0
		}
		return []target{
			{measure: measureGoodputRatio, bound: atLeast, limit: ratio, concurrency: 64},
			{measure: measureP99, bound: atMost, limit: 300},
			{measure: measure429, bound: atMost, limit: 0},
		}
	}}, nil
}

// newCrewHerd is ONE crew of --capacity seats and more users than seats: most answers are a
// cheap CREW_FULL, so requests/s flatters. Judged on time-to-fill and p99.
func newCrewHerd(cfg config) (scenario, error) {
	if cfg.capacity < 1 || cfg.capacity > maxCapacity {
		return nil, fmt.Errorf("crew-herd: --capacity must be 1..%d", maxCapacity)
	}
	seats := min(cfg.capacity, cfg.users)
	return &crewJoin{users: cfg.users, crews: 1, capacity: cfg.capacity, judgedOn: func(gormdb.Dialect) []target {
		return []target{
			{measure: measureTimeToFill, grants: seats},
			{measure: measureFillRatio, grants: seats},
			{measure: measureP99, bound: atMost, limit: 300},
		}
	}}, nil
}

// newCrewSpread is --users joins over --crews crews, each with a seat for every user sent to
// it: no join is refused and none contends for a last seat. Judged on goodput ÷ the same
// transaction spread over as many crews.
func newCrewSpread(cfg config) (scenario, error) {
	if cfg.crews < 1 {
		return nil, errors.New("crew-spread: --crews must be at least 1")
	}
	capacity := max(1, (cfg.users+cfg.crews-1)/cfg.crews)
	if capacity > maxCapacity {
		return nil, fmt.Errorf("crew-spread: %d users per crew: a crew holds at most %d", capacity, maxCapacity)
	}
	return &crewJoin{users: cfg.users, crews: cfg.crews, capacity: capacity, judgedOn: func(gormdb.Dialect) []target {
		return []target{{measure: measureGoodputRatio, bound: atLeast, limit: 0.8}}
	}}, nil
}

// crewJoin is users joining crews of one capacity: user i joins crew i mod crews.
type crewJoin struct {
	users, crews, capacity int
	judgedOn               func(gormdb.Dialect) []target

	// Set by prepare.
	crewIDs []string
	joins   []joinRequest
}

var _ scenario = (*crewJoin)(nil)

// joinRequest is one user's join, prepared before timing starts.
type joinRequest struct {
	userID  string
	path    string
	headers map[string]string
}

func (s *crewJoin) crewOf(user int) int { return user % s.crews }

// assigned is how many users are sent to crew c.
func (s *crewJoin) assigned(c int) int {
	n := s.users / s.crews
	if c < s.users%s.crews {
		n++
	}
	return n
}

func (s *crewJoin) shape() string {
	crews := "1 crew"
	if s.crews != 1 {
		crews = fmt.Sprintf("%d crews", s.crews)
	}
	return fmt.Sprintf("%d users → %s of %d seats", s.users, crews, s.capacity)
}

func (s *crewJoin) targets(d gormdb.Dialect) []target { return s.judgedOn(d) }

// prepare creates the crews through the API and mints one token per user.
func (s *crewJoin) prepare(ctx context.Context, e *env) error {
	admin, err := e.adminToken()
	if err != nil {
		return fmt.Errorf("mint admin token: %w", err)
	}
	s.crewIDs = make([]string, s.crews)
	for c := range s.crewIDs {
		name := fmt.Sprintf("rushgate-load %s #%d", e.runID, c)
		crew, err := createByAdmin(ctx, e.api, c, admin, "/crews", map[string]any{"name": name, "maxMembers": s.capacity})
		if err != nil {
			return fmt.Errorf("create crew: %w", err)
		}
		s.crewIDs[c] = crew.ID
	}
	s.joins = make([]joinRequest, s.users)
	for i := range s.joins {
		user := e.userID(i)
		bearer, err := e.userToken(user)
		if err != nil {
			return fmt.Errorf("mint token for %s: %w", user, err)
		}
		s.joins[i] = joinRequest{
			userID: user,
			path:   "/crews/" + url.PathEscape(s.crewIDs[s.crewOf(i)]) + "/join",
			headers: map[string]string{
				"Authorization":             "Bearer " + bearer,
				rghttp.IdempotencyKeyHeader: "join-" + user,
			},
		}
	}
	return nil
}

// run sends every user's join; a join succeeds with 201 only.
func (s *crewJoin) run(e *env) work {
	return work{n: s.users, do: func(ctx context.Context, i int) attempt {
		j := s.joins[i]
		a, _ := e.api.post(ctx, i, j.path, j.headers, nil)
		a.ok = a.status == http.StatusCreated
		return a
	}}
}

// invariant reads every crew back and checks it against the answers its users got.
func (s *crewJoin) invariant(ctx context.Context, e *env, attempts []attempt) (invariantResult, error) {
	sent := make([]map[string]attempt, s.crews)
	for c := range sent {
		sent[c] = make(map[string]attempt, s.assigned(c))
	}
	for i, a := range attempts {
		sent[s.crewOf(i)][s.joins[i].userID] = a
	}
	states := make([]crewState, s.crews)
	for c, id := range s.crewIDs {
		st, err := readCrew(ctx, e.db, id)
		if err != nil {
			return invariantResult{}, err
		}
		st.sent = sent[c]
		states[c] = st
	}
	return summarizeCrews(states), nil
}

// ceiling creates the same crews with SQL and returns the same joins as bare transactions.
func (s *crewJoin) ceiling(ctx context.Context, e *env) (work, error) {
	dialect := e.db.Dialect()
	crewIDs := make([]string, s.crews)
	createdAt := time.Now().UTC()
	for c := range crewIDs {
		crewIDs[c] = uuid.NewString()
		name := fmt.Sprintf("rushgate-load ceiling %s #%d", e.runID, c)
		if _, err := e.db.SQL().ExecContext(ctx, gormdb.Bind(dialect, insertCrewSQL), crewIDs[c], name, s.capacity, createdAt); err != nil {
			return work{}, fmt.Errorf("ceiling: create crew: %w", err)
		}
	}
	stmts := newJoinStatements(dialect)
	return work{n: s.users, do: func(ctx context.Context, i int) attempt {
		ctx, cancel := context.WithTimeout(ctx, e.timeout)
		defer cancel()
		start := time.Now()
		err := joinTx(ctx, e.db.SQL(), stmts, crewIDs[s.crewOf(i)], fmt.Sprintf("ceiling-%s-%d", e.runID, i))
		a := attempt{latency: time.Since(start), ok: err == nil}
		if err != nil && !errors.Is(err, errCrewFull) {
			a.err = err
		}
		return a
	}}, nil
}
