// Package crew is the capacity-limited group users join: its rules and errors.
package crew

import (
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/capacity"
)

// Capacity bounds of a crew.
const (
	MinMaxMembers = 1
	MaxMaxMembers = 100000
	MaxNameLength = 200
)

var (
	ErrNotFound      = domain.NewError(domain.KindNotFound, "CREW_NOT_FOUND", "crew not found")
	ErrFull          = domain.NewError(domain.KindInvalid, "CREW_FULL", "crew is full")
	ErrAlreadyMember = domain.NewError(domain.KindConflict, "ALREADY_MEMBER", "user is already a member of this crew")
	ErrNotMember     = domain.NewError(domain.KindNotFound, "NOT_MEMBER", "user is not a member of this crew")
)

// Crew is the aggregate guarding the invariant currentMembers == count(members) <= maxMembers.
type Crew struct {
	id             string
	name           string
	maxMembers     int
	currentMembers int
	createdAt      time.Time
}

// New validates and creates an empty crew.
func New(id, name string, maxMembers int, now time.Time) (*Crew, error) {
	if err := domain.ValidateText("name", name, MaxNameLength); err != nil {
		return nil, err
	}
	if maxMembers < MinMaxMembers || maxMembers > MaxMaxMembers {
		return nil, domain.Invalid("maxMembers", "must be between %d and %d", MinMaxMembers, MaxMaxMembers)
	}
	return &Crew{id: id, name: name, maxMembers: maxMembers, createdAt: now}, nil
}

// Rebuild restores a crew from storage without re-validating; adapters only.
func Rebuild(id, name string, maxMembers, currentMembers int, createdAt time.Time) *Crew {
	return &Crew{id: id, name: name, maxMembers: maxMembers, currentMembers: currentMembers, createdAt: createdAt}
}

func (c *Crew) ID() string           { return c.id }
func (c *Crew) Name() string         { return c.name }
func (c *Crew) MaxMembers() int      { return c.maxMembers }
func (c *Crew) CurrentMembers() int  { return c.currentMembers }
func (c *Crew) CreatedAt() time.Time { return c.createdAt }

// Join takes a seat for userID, or fails with ErrFull.
func (c *Crew) Join(userID string, now time.Time) (Member, error) {
	joined, verdicts := c.JoinAll([]string{userID}, nil, now)
	if verdicts[0] != nil {
		return Member{}, verdicts[0]
	}
	return joined[0], nil
}

// Remaining is how many seats are free.
func (c *Crew) Remaining() int { return c.maxMembers - c.currentMembers }

// JoinAll seats userIDs in order while seats last, each as if it joined alone: a user among
// members (the users known to be members already; nil when not looked up) or seated earlier in
// the call fails with ErrAlreadyMember, a user past the capacity with ErrFull. It returns the
// new members, in order, and one verdict per user: nil when seated, else its refusal.
func (c *Crew) JoinAll(userIDs []string, members map[string]bool, now time.Time) ([]Member, []error) {
	verdicts := capacity.Allot(userIDs, members, c.Remaining(), ErrAlreadyMember, ErrFull)
	var joined []Member
	for i, userID := range userIDs {
		if verdicts[i] == nil {
			joined = append(joined, Member{CrewID: c.id, UserID: userID, JoinedAt: now})
		}
	}
	c.currentMembers += len(joined)
	return joined, verdicts
}

// Leave frees the seat of a member who has just been removed.
func (c *Crew) Leave() {
	if c.currentMembers > 0 {
		c.currentMembers--
	}
}

// Member is one user's seat in a crew; (CrewID, UserID) is unique.
type Member struct {
	CrewID   string
	UserID   string
	JoinedAt time.Time
}
