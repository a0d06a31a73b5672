// Package crew holds the crew use cases: create, read, list members, join (guarded) and leave.
// It depends on ports only, so another Go service can embed it with its own adapters.
package crew

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
)

// Page bounds for member listing (SPEC §0).
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 500
)

// StatusCreated is the status a successful join answers and replays.
const StatusCreated = 201

// Service runs the crew use cases.
type Service struct {
	tx      ports.TxRunner
	crews   ports.CrewRepository
	members ports.CrewMemberRepository
	guard   *guard.Guard
	clock   ports.Clock
	ids     ports.IDGenerator
}

// NewService wires the crew use cases to their ports.
func NewService(tx ports.TxRunner, crews ports.CrewRepository, members ports.CrewMemberRepository,
	g *guard.Guard, clock ports.Clock, ids ports.IDGenerator) *Service {
	return &Service{tx: tx, crews: crews, members: members, guard: g, clock: clock, ids: ids}
}

// View is a crew as clients see it.
type View struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	MaxMembers     int       `json:"maxMembers"`
	CurrentMembers int       `json:"currentMembers"`
	CreatedAt      time.Time `json:"createdAt"`
}

func viewOf(c *crew.Crew) View {
	return View{ID: c.ID(), Name: c.Name(), MaxMembers: c.MaxMembers(), CurrentMembers: c.CurrentMembers(), CreatedAt: c.CreatedAt()}
}

// CreateCommand creates a crew.
type CreateCommand struct {
	Name       string
	MaxMembers int
}

// Create validates and stores a new, empty crew.
func (s *Service) Create(ctx context.Context, cmd CreateCommand) (View, error) {
	c, err := crew.New(s.ids.NewID(), cmd.Name, cmd.MaxMembers, s.clock.Now())
	if err != nil {
		return View{}, err
	}
	if err := s.crews.Create(ctx, c); err != nil {
		return View{}, fmt.Errorf("create crew: %w", err)
	}
	return viewOf(c), nil
}

// Get returns one crew or crew.ErrNotFound.
func (s *Service) Get(ctx context.Context, crewID string) (View, error) {
	if err := ValidateCrewID(crewID); err != nil {
		return View{}, err
	}
	c, err := s.crews.Get(ctx, crewID)
	if err != nil {
		return View{}, err
	}
	return viewOf(c), nil
}

// MemberView is one member as clients see it.
type MemberView struct {
	CrewID   string    `json:"crewId"`
	UserID   string    `json:"userId"`
	JoinedAt time.Time `json:"joinedAt"`
}

// MemberPage is one page of members; NextCursor is nil on the last page.
type MemberPage struct {
	Items      []MemberView `json:"items"`
	NextCursor *string      `json:"nextCursor"`
}

// ListMembers pages through a crew's members in join order. limit 0 means DefaultPageLimit.
func (s *Service) ListMembers(ctx context.Context, crewID string, limit int, cursor string) (MemberPage, error) {
	if err := ValidateCrewID(crewID); err != nil {
		return MemberPage{}, err
	}
	if limit == 0 {
		limit = DefaultPageLimit
	}
	if limit < 1 || limit > MaxPageLimit {
		return MemberPage{}, domain.Invalid("limit", "must be between 1 and %d", MaxPageLimit)
	}
	after, err := decodeCursor(cursor)
	if err != nil {
		return MemberPage{}, err
	}
	if _, err := s.crews.Get(ctx, crewID); err != nil {
		return MemberPage{}, err
	}
	// One extra row tells whether another page follows.
	members, err := s.members.List(ctx, crewID, after, limit+1)
	if err != nil {
		return MemberPage{}, fmt.Errorf("list members: %w", err)
	}
	page := MemberPage{Items: make([]MemberView, 0, min(len(members), limit))}
	for i, m := range members {
		if i == limit {
			next := encodeCursor(members[i-1])
			page.NextCursor = &next
			break
		}
		page.Items = append(page.Items, MemberView{CrewID: m.CrewID, UserID: m.UserID, JoinedAt: m.JoinedAt})
	}
	return page, nil
}

type cursorJSON struct {
	JoinedAt time.Time `json:"t"`
	UserID   string    `json:"u"`
}

func encodeCursor(m crew.Member) string {
	b, _ := json.Marshal(cursorJSON{JoinedAt: m.JoinedAt, UserID: m.UserID})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (*ports.MemberCursor, error) {
	if s == "" {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	var c cursorJSON
	if err != nil || json.Unmarshal(raw, &c) != nil || c.UserID == "" {
		return nil, domain.Invalid("cursor", "is not a cursor this server issued")
	}
	return &ports.MemberCursor{JoinedAt: c.JoinedAt, UserID: c.UserID}, nil
}

// JoinCommand asks for userID to join crewID; IdempotencyKey is required.
type JoinCommand struct {
	CrewID         string
	UserID         string
	IdempotencyKey string
}

// JoinResult is the answer to a successful join.
type JoinResult struct {
	CrewID         string    `json:"crewId"`
	UserID         string    `json:"userId"`
	JoinedAt       time.Time `json:"joinedAt"`
	CurrentMembers int       `json:"currentMembers"`
	MaxMembers     int       `json:"maxMembers"`
}

// Join seats the user in the crew (SPEC §1): guarded by idempotency, an early rejection of a
// full crew, and the lock crew:{id}; then one transaction locks the crew row, checks capacity
// and membership, inserts the member and increments the count. Fails with crew.ErrNotFound,
// crew.ErrFull or crew.ErrAlreadyMember.
func (s *Service) Join(ctx context.Context, cmd JoinCommand) (guard.Result[JoinResult], error) {
	if err := ValidateCrewID(cmd.CrewID); err != nil {
		return guard.Result[JoinResult]{}, err
	}
	if err := domain.ValidateUserID("userId", cmd.UserID); err != nil {
		return guard.Result[JoinResult]{}, err
	}
	req := guard.Request{
		UserID:         cmd.UserID,
		IdempotencyKey: cmd.IdempotencyKey,
		Fingerprint:    guard.Fingerprint("POST /crews/"+cmd.CrewID+"/join", nil),
		LockKey:        "crew:" + cmd.CrewID,
		SuccessStatus:  StatusCreated,
		Precheck: func(ctx context.Context) error {
			return s.rejectEarly(ctx, cmd.CrewID, cmd.UserID)
		},
	}
	return guard.Run(ctx, s.guard, req, func(ctx context.Context) (JoinResult, error) {
		return s.join(ctx, cmd.CrewID, cmd.UserID)
	})
}

// rejectEarly answers an unknown or full crew without queueing for the lock: once a crew fills,
// the rest of a stampede hears CREW_FULL at once. Seats only come back through Leave, so a full
// reading may be a moment stale but was true when taken; join re-checks under the row lock.
func (s *Service) rejectEarly(ctx context.Context, crewID, userID string) error {
	c, err := s.crews.Get(ctx, crewID)
	if err != nil {
		return err
	}
	if c.CurrentMembers() < c.MaxMembers() {
		return nil
	}
	already, err := s.members.Exists(ctx, crewID, userID)
	if err != nil {
		return fmt.Errorf("check membership: %w", err)
	}
	if already {
		return crew.ErrAlreadyMember
	}
	return crew.ErrFull
}

func (s *Service) join(ctx context.Context, crewID, userID string) (JoinResult, error) {
	var res JoinResult
	err := s.tx.InTx(ctx, func(ctx context.Context) error {
		c, err := s.crews.GetForUpdate(ctx, crewID)
		if err != nil {
			return err
		}
		// Checked under the row lock so a member retrying a full crew hears ALREADY_MEMBER; the
		// UNIQUE index still decides any race.
		already, err := s.members.Exists(ctx, crewID, userID)
		if err != nil {
			return fmt.Errorf("check membership: %w", err)
		}
		if already {
			return crew.ErrAlreadyMember
		}
		m, err := c.Join(userID, s.clock.Now())
		if err != nil {
			return err
		}
		if err := s.members.Add(ctx, m); err != nil {
			return err
		}
		if err := s.crews.Save(ctx, c); err != nil {
			return fmt.Errorf("save crew: %w", err)
		}
		res = JoinResult{CrewID: c.ID(), UserID: userID, JoinedAt: m.JoinedAt, CurrentMembers: c.CurrentMembers(), MaxMembers: c.MaxMembers()}
		return nil
	})
	return res, err
}

// LeaveCommand removes userID from crewID, freeing a seat.
type LeaveCommand struct {
	CrewID string
	UserID string
}

// Leave removes the membership and decrements the count in one transaction under the crew's row
// lock. Fails with crew.ErrNotFound or crew.ErrNotMember.
func (s *Service) Leave(ctx context.Context, cmd LeaveCommand) error {
	if err := ValidateCrewID(cmd.CrewID); err != nil {
		return err
	}
	if err := domain.ValidateUserID("userId", cmd.UserID); err != nil {
		return err
	}
	return s.tx.InTx(ctx, func(ctx context.Context) error {
		c, err := s.crews.GetForUpdate(ctx, cmd.CrewID)
		if err != nil {
			return err
		}
		if err := s.members.Remove(ctx, cmd.CrewID, cmd.UserID); err != nil {
			return err
		}
		c.Leave()
		if err := s.crews.Save(ctx, c); err != nil {
			return fmt.Errorf("save crew: %w", err)
		}
		return nil
	})
}
