package http

import (
	"time"

	appraffle "github.com/rushgate/rushgate/application/raffle"
)

// raffleJSON is a raffle; seed and cutoffTicket appear once the draw has run.
type raffleJSON struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Winners      int       `json:"winners"`
	ClosesAt     time.Time `json:"closesAt"`
	Status       string    `json:"status"`
	Entries      int       `json:"entries"`
	SeedHash     string    `json:"seedHash"`
	Seed         *string   `json:"seed,omitempty"`
	CutoffTicket *string   `json:"cutoffTicket,omitempty"`
}

func wireRaffle(v appraffle.View) raffleJSON { return raffleJSON(v) }

// createdRaffleJSON answers the raffle's creation: its terms and the commitment.
type createdRaffleJSON struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Winners  int       `json:"winners"`
	ClosesAt time.Time `json:"closesAt"`
	Status   string    `json:"status"`
	SeedHash string    `json:"seedHash"`
}

func wireCreatedRaffle(v appraffle.View) createdRaffleJSON {
	return createdRaffleJSON{ID: v.ID, Name: v.Name, Winners: v.Winners, ClosesAt: v.ClosesAt, Status: v.Status,
		SeedHash: v.SeedHash}
}

type raffleEntryJSON struct {
	RaffleID  string    `json:"raffleId"`
	UserID    string    `json:"userId"`
	EnteredAt time.Time `json:"enteredAt"`
}

func wireRaffleEntry(v appraffle.EntryView) raffleEntryJSON { return raffleEntryJSON(v) }

// raffleStandingJSON is a user's standing; ticket appears once the draw has run.
type raffleStandingJSON struct {
	Status string  `json:"status"`
	Ticket *string `json:"ticket,omitempty"`
}

func wireRaffleStanding(v appraffle.StandingView) raffleStandingJSON { return raffleStandingJSON(v) }
