package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/rushgate/rushgate/adapters/gormdb"
)

// invariantResult is what a scenario's invariant check read from the database and how it broke.
type invariantResult struct {
	rows       []invariantRow // what the database holds, for the report
	violations []string       // one line per problem, naming what broke
}

// invariantRow is one labelled number of the invariant check, or of a scenario's own
// measurements (text, shown instead of value when set).
type invariantRow struct {
	label string
	value int
	text  string
}

// holds reports whether nothing broke.
func (r invariantResult) holds() bool { return len(r.violations) == 0 }

// The crews' invariant: currentMembers == count(crew_members) <= maxMembers, no user
// twice; and the members are exactly the users the server answered 201, give or take those whose
// outcome the run cannot know (5xx, no response). A user answered 429 was shed, not seated: it
// must not be a member, and it is not a violation.

const (
	crewCounterSQL = `SELECT current_members, max_members FROM crews WHERE id = ?`
	crewMembersSQL = `SELECT user_id FROM crew_members WHERE crew_id = ?`
)

// crewState is one crew as the database holds it after the run, and what its users were told.
type crewState struct {
	id             string
	currentMembers int
	maxMembers     int
	memberIDs      []string           // user_id of every crew_members row
	sent           map[string]attempt // user → the answer to their join
}

// readCrew reads one crew's counter and member rows.
func readCrew(ctx context.Context, db *gormdb.DB, id string) (crewState, error) {
	s := crewState{id: id}
	err := db.SQL().QueryRowContext(ctx, gormdb.Bind(db.Dialect(), crewCounterSQL), id).Scan(&s.currentMembers, &s.maxMembers)
	if err != nil {
		return crewState{}, fmt.Errorf("invariant: read crew %s: %w", id, err)
	}
	rows, err := db.SQL().QueryContext(ctx, gormdb.Bind(db.Dialect(), crewMembersSQL), id)
	if err != nil {
		return crewState{}, fmt.Errorf("invariant: read members of crew %s: %w", id, err)
	}
	defer func() { _ = rows.Close() }() // rows.Err below reports what matters
	for rows.Next() {
		var user string
		if err := rows.Scan(&user); err != nil {
			return crewState{}, fmt.Errorf("invariant: read members of crew %s: %w", id, err)
		}
		s.memberIDs = append(s.memberIDs, user)
	}
	if err := rows.Err(); err != nil {
		return crewState{}, fmt.Errorf("invariant: read members of crew %s: %w", id, err)
	}
	return s, nil
}

// outcome is what an answer says about the user's seat.
type outcome int

const (
	seated  outcome = iota // 201: the user must be a member
	refused                // a 4xx other than 409 (CREW_FULL, 429, …): the user must not be
	maybe                  // 409 ALREADY_MEMBER, 5xx or no response: either is consistent
)

func outcomeOf(a attempt) outcome {
	switch {
	case a.status == http.StatusCreated:
		return seated
	case a.status == http.StatusConflict, a.status == 0, a.status >= http.StatusInternalServerError:
		return maybe
	case a.status >= http.StatusBadRequest:
		return refused
	}
	return maybe
}

// problems lists how the crew breaks the invariant.
func (s crewState) problems() []string {
	var p []string
	members := len(s.memberIDs)
	if s.currentMembers != members {
		p = append(p, fmt.Sprintf("currentMembers %d != count(crew_members) %d", s.currentMembers, members))
	}
	if members > s.maxMembers {
		p = append(p, fmt.Sprintf("count(crew_members) %d > maxMembers %d", members, s.maxMembers))
	}
	in := make(map[string]bool, members)
	var dup, strangers, wronglySeated int
	var firstWrong string
	for _, user := range s.memberIDs {
		if in[user] {
			dup++
			continue
		}
		in[user] = true
		a, ok := s.sent[user]
		switch {
		case !ok:
			strangers++
		case outcomeOf(a) == refused:
			if wronglySeated == 0 {
				firstWrong = fmt.Sprintf("%s answered %d %s", user, a.status, a.code)
			}
			wronglySeated++
		}
	}
	if dup > 0 {
		p = append(p, fmt.Sprintf("%d duplicate member rows", dup))
	}
	if strangers > 0 {
		p = append(p, fmt.Sprintf("%d members the run never sent to this crew", strangers))
	}
	if wronglySeated > 0 {
		p = append(p, fmt.Sprintf("%d members were refused a seat (first: %s)", wronglySeated, firstWrong))
	}
	var lost, full int
	var firstLost string
	for user, a := range s.sent {
		if outcomeOf(a) == seated && !in[user] {
			if lost == 0 || user < firstLost {
				firstLost = user
			}
			lost++
		}
		if a.status == http.StatusBadRequest && a.code == "CREW_FULL" {
			full++
		}
	}
	if lost > 0 {
		p = append(p, fmt.Sprintf("%d users answered 201 are not members (e.g. %s)", lost, firstLost))
	}
	if full > 0 && len(in) < s.maxMembers {
		p = append(p, fmt.Sprintf("%d users answered CREW_FULL with %d of %d seats taken", full, len(in), s.maxMembers))
	}
	return p
}

// summarizeCrews sums the crews' states and collects their problems.
func summarizeCrews(states []crewState) invariantResult {
	var current, members, distinct, answered201 int
	var violations []string
	for _, s := range states {
		current += s.currentMembers
		members += len(s.memberIDs)
		seen := make(map[string]bool, len(s.memberIDs))
		for _, u := range s.memberIDs {
			seen[u] = true
		}
		distinct += len(seen)
		for _, a := range s.sent {
			if outcomeOf(a) == seated {
				answered201++
			}
		}
		for _, p := range s.problems() {
			violations = append(violations, fmt.Sprintf("crew %s: %s", s.id, p))
		}
	}
	return invariantResult{
		rows: []invariantRow{
			{label: "db: currentMembers (Σ crews)", value: current},
			{label: "db: count(crew_members)", value: members},
			{label: "db: count(distinct user_id)", value: distinct},
			{label: "expected: users answered 201", value: answered201},
		},
		violations: violations,
	}
}
