package http

import (
	"time"

	appcrew "github.com/rushgate/rushgate/application/crew"
)

type crewJSON struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	MaxMembers     int       `json:"maxMembers"`
	CurrentMembers int       `json:"currentMembers"`
	CreatedAt      time.Time `json:"createdAt"`
}

func wireCrew(v appcrew.View) crewJSON { return crewJSON(v) }

type memberJSON struct {
	CrewID   string    `json:"crewId"`
	UserID   string    `json:"userId"`
	JoinedAt time.Time `json:"joinedAt"`
}

func wireMember(v appcrew.MemberView) memberJSON { return memberJSON(v) }

func wireMemberPage(p appcrew.MemberPage) pageJSON[memberJSON] {
	return wirePage(p.Items, p.NextCursor, wireMember)
}

type joinJSON struct {
	CrewID         string    `json:"crewId"`
	UserID         string    `json:"userId"`
	JoinedAt       time.Time `json:"joinedAt"`
	CurrentMembers int       `json:"currentMembers"`
	MaxMembers     int       `json:"maxMembers"`
}

func wireJoin(v appcrew.JoinResult) joinJSON { return joinJSON(v) }
