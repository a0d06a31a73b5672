package main

import (
	"context"
	"fmt"

	"github.com/rushgate/rushgate/adapters/gormdb"
)

// crewStateSQL reads one crew's counter and its member rows in one statement.
const crewStateSQL = `SELECT c.current_members, c.max_members,
	(SELECT COUNT(*) FROM crew_members m WHERE m.crew_id = c.id),
	(SELECT COUNT(DISTINCT m.user_id) FROM crew_members m WHERE m.crew_id = c.id)
FROM crews c WHERE c.id = ?`

// crewState is one crew as the database holds it after the run.
type crewState struct {
	id             string
	currentMembers int
	maxMembers     int
	members        int // count(crew_members)
	distinctUsers  int // count(distinct user_id)
	expected       int // members the scenario must leave: min(users sent, capacity)
}

// problems lists how the crew breaks SPEC §1's invariant (currentMembers == count(members) <=
// maxMembers, no user twice) or the scenario's expected member count.
func (s crewState) problems() []string {
	var p []string
	if s.currentMembers != s.members {
		p = append(p, fmt.Sprintf("currentMembers %d != count(crew_members) %d", s.currentMembers, s.members))
	}
	if s.members > s.maxMembers {
		p = append(p, fmt.Sprintf("count(crew_members) %d > maxMembers %d", s.members, s.maxMembers))
	}
	if s.distinctUsers != s.members {
		p = append(p, fmt.Sprintf("%d duplicate member rows", s.members-s.distinctUsers))
	}
	if s.members != s.expected {
		p = append(p, fmt.Sprintf("count(crew_members) %d, want %d", s.members, s.expected))
	}
	return p
}

// invariantResult is the invariant check summed over the scenario's crews.
type invariantResult struct {
	crews          int
	currentMembers int
	members        int
	distinctUsers  int
	expected       int
	violations     []string // "crew <id>: <problem>", one per problem
}

// holds reports whether every crew passed.
func (r invariantResult) holds() bool { return len(r.violations) == 0 }

// summarizeCrews sums the crews' states and collects their problems.
func summarizeCrews(states []crewState) invariantResult {
	r := invariantResult{crews: len(states)}
	for _, s := range states {
		r.currentMembers += s.currentMembers
		r.members += s.members
		r.distinctUsers += s.distinctUsers
		r.expected += s.expected
		for _, p := range s.problems() {
			r.violations = append(r.violations, fmt.Sprintf("crew %s: %s", s.id, p))
		}
	}
	return r
}

// checkInvariant reads the rushgate run's crews back from the database, bypassing the server.
func checkInvariant(ctx context.Context, db *gormdb.DB, sc scenario, crewIDs []string) (invariantResult, error) {
	query := rebind(db.Dialect(), crewStateSQL)
	states := make([]crewState, len(crewIDs))
	for c, id := range crewIDs {
		s := crewState{id: id, expected: sc.expectedMembers(c)}
		err := db.SQL().QueryRowContext(ctx, query, id).Scan(&s.currentMembers, &s.maxMembers, &s.members, &s.distinctUsers)
		if err != nil {
			return invariantResult{}, fmt.Errorf("invariant: read crew %s: %w", id, err)
		}
		states[c] = s
	}
	return summarizeCrews(states), nil
}
