package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCrewInvariant(t *testing.T) {
	t.Parallel()
	created := attempt{status: 201, ok: true}
	full := attempt{status: 400, code: "CREW_FULL"}
	shed := attempt{status: 429, code: "TOO_MANY_REQUESTS"}
	unavailable := attempt{status: 503}

	cases := []struct {
		name  string
		state crewState
		want  []string
	}{
		{"members are exactly the 201s", crewState{
			currentMembers: 2, maxMembers: 2, memberIDs: []string{"a", "b"},
			sent: map[string]attempt{"a": created, "b": created, "c": full},
		}, nil},
		{"a user shed with 429 has no seat and breaks nothing", crewState{
			currentMembers: 1, maxMembers: 3, memberIDs: []string{"a"},
			sent: map[string]attempt{"a": created, "b": shed, "c": shed},
		}, nil},
		{"a 5xx may or may not have seated the user", crewState{
			currentMembers: 1, maxMembers: 3, memberIDs: []string{"b"},
			sent: map[string]attempt{"a": unavailable, "b": unavailable},
		}, nil},
		{"a user answered 429 must not be a member", crewState{
			currentMembers: 2, maxMembers: 3, memberIDs: []string{"a", "b"},
			sent: map[string]attempt{"a": created, "b": shed},
		}, []string{"1 members were refused a seat (first: b answered 429 TOO_MANY_REQUESTS)"}},
		{"a 201 without a member row is a lost join", crewState{
			currentMembers: 1, maxMembers: 3, memberIDs: []string{"a"},
			sent: map[string]attempt{"a": created, "b": created},
		}, []string{"1 users answered 201 are not members (e.g. b)"}},
		{"CREW_FULL while seats remain", crewState{
			currentMembers: 1, maxMembers: 2, memberIDs: []string{"a"},
			sent: map[string]attempt{"a": created, "b": full},
		}, []string{"1 users answered CREW_FULL with 1 of 2 seats taken"}},
		{"a drifted counter", crewState{
			currentMembers: 3, maxMembers: 3, memberIDs: []string{"a", "b"},
			sent: map[string]attempt{"a": created, "b": created},
		}, []string{"currentMembers 3 != count(crew_members) 2"}},
		{"over capacity, and a member nobody sent", crewState{
			currentMembers: 2, maxMembers: 1, memberIDs: []string{"a", "z"},
			sent: map[string]attempt{"a": created},
		}, []string{"count(crew_members) 2 > maxMembers 1", "1 members the run never sent to this crew"}},
		{"a user twice", crewState{
			currentMembers: 2, maxMembers: 2, memberIDs: []string{"a", "a"},
			sent: map[string]attempt{"a": created},
		}, []string{"1 duplicate member rows"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, c.want, c.state.problems())
		})
	}
}

func TestSummarizeCrews_SumsTheCrewsAndNamesEveryBrokenOne(t *testing.T) {
	t.Parallel()
	created := attempt{status: 201, ok: true}
	r := summarizeCrews([]crewState{
		{id: "ok", currentMembers: 1, maxMembers: 1, memberIDs: []string{"a"}, sent: map[string]attempt{"a": created}},
		{id: "drifted", currentMembers: 2, maxMembers: 2, memberIDs: []string{"b"}, sent: map[string]attempt{"b": created}},
	})

	assert.False(t, r.holds())
	assert.Equal(t, []string{"crew drifted: currentMembers 2 != count(crew_members) 1"}, r.violations)
	assert.Equal(t, []invariantRow{
		{label: "db: currentMembers (Σ crews)", value: 3},
		{label: "db: count(crew_members)", value: 2},
		{label: "db: count(distinct user_id)", value: 2},
		{label: "expected: users answered 201", value: 2},
	}, r.rows)
}
