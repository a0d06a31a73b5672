// Package crew holds the crew use cases: create, read, list members, join (guarded) and leave.
// It depends on ports only, so another Go service can embed it with its own adapters.
package crew

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
)

// DefaultFullHintTTL is how long an instance trusts that a crew it saw full is still full when
// Config.FullHintTTL is zero.
const DefaultFullHintTTL = time.Second

// Config tunes the crew use cases.
type Config struct {
	// MaxBatch bounds how many joins of one crew a lock hold serves in one transaction;
	// guard.DefaultMaxBatch when zero.
	MaxBatch int
	// FullHintTTL is how long a crew this instance saw full is answered CREW_FULL without
	// queueing for its lock (DefaultFullHintTTL when zero). A leave through this instance forgets
	// the hint at once; a leave through another instance is seen when the hint expires.
	FullHintTTL time.Duration
	// SharedTransactions is how many transactions shared by the joins of different crews may be
	// out at once (guard.LaneConfig.SharedTransactions); DefaultSharedTransactions when zero.
	SharedTransactions int
}

// DefaultSharedTransactions is Config.SharedTransactions when zero.
const DefaultSharedTransactions = 2

// Deps are the ports and the guard the crew use cases run on.
type Deps struct {
	Tx      ports.TxRunner
	Crews   ports.CrewRepository
	Members ports.CrewMemberRepository
	Guard   *guard.Guard
	Clock   ports.Clock
	IDs     ports.IDGenerator
}

// Service runs the crew use cases.
type Service struct {
	tx      ports.TxRunner
	crews   ports.CrewRepository
	members ports.CrewMemberRepository
	clock   ports.Clock
	ids     ports.IDGenerator
	joins   *guard.Lane[joinInput, JoinResult]
	full    fullHints
}

// NewService wires the crew use cases to their ports.
func NewService(d Deps, cfg Config) *Service {
	if cfg.FullHintTTL <= 0 {
		cfg.FullHintTTL = DefaultFullHintTTL
	}
	if cfg.SharedTransactions <= 0 {
		cfg.SharedTransactions = DefaultSharedTransactions
	}
	s := &Service{tx: d.Tx, crews: d.Crews, members: d.Members, clock: d.Clock, ids: d.IDs,
		full: fullHints{clock: d.Clock, ttl: cfg.FullHintTTL}}
	s.joins = guard.NewLane(d.Guard, guard.LaneConfig{
		MaxBatch: cfg.MaxBatch, Markers: true, SharedTransactions: cfg.SharedTransactions,
	}, s.joinBatch)
	return s
}

// View is a crew as clients see it.
type View struct {
	ID             string
	Name           string
	MaxMembers     int
	CurrentMembers int
	CreatedAt      time.Time
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
	c, err := s.crews.Get(ports.AllowStale(ctx), crewID)
	if err != nil {
		return View{}, err
	}
	return viewOf(c), nil
}

// MemberView is one member as clients see it.
type MemberView struct {
	CrewID   string
	UserID   string
	JoinedAt time.Time
}

// MemberPage is one page of members; NextCursor is nil on the last page.
type MemberPage struct {
	Items      []MemberView
	NextCursor *string
}

// ListMembers pages through a crew's members in join order. limit 0 means domain.DefaultPageLimit.
func (s *Service) ListMembers(ctx context.Context, crewID string, limit int, cursor string) (MemberPage, error) {
	if err := ValidateCrewID(crewID); err != nil {
		return MemberPage{}, err
	}
	limit, err := domain.PageLimit(limit)
	if err != nil {
		return MemberPage{}, err
	}
	after, err := decodeCursor(cursor)
	if err != nil {
		return MemberPage{}, err
	}
	// A shown list: a replica may serve it.
	ctx = ports.AllowStale(ctx)
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

// A member cursor is the last member's place in join order, opaque to clients: base64 of
// {"t": joinedAt, "u": userId}.
func encodeCursor(m crew.Member) string {
	b, _ := json.Marshal(map[string]any{"t": m.JoinedAt, "u": m.UserID})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (*ports.MemberCursor, error) {
	if s == "" {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	var c struct {
		T time.Time // matches "t": encoding/json matches names regardless of case
		U string
	}
	if err != nil || json.Unmarshal(raw, &c) != nil || domain.ValidateUserID("cursor", c.U) != nil ||
		domain.ValidateInstant("cursor", c.T) != nil {
		return nil, domain.Invalid("cursor", "is not a cursor this server issued")
	}
	return &ports.MemberCursor{JoinedAt: c.T, UserID: c.U}, nil
}

// JoinCommand asks for userID to join crewID; IdempotencyKey is required.
type JoinCommand struct {
	CrewID         string
	UserID         string
	IdempotencyKey string
}

// JoinResult is the answer to a successful join.
type JoinResult struct {
	CrewID         string
	UserID         string
	JoinedAt       time.Time
	CurrentMembers int
	MaxMembers     int
}

// joinInput is one join waiting in the crew's lane.
type joinInput struct {
	crewID, userID string
}

// Join seats the user in the crew through the guard: idempotency, an early CREW_FULL
// for a crew this instance saw full, then the lock crew:{id}, whose holder seats every join
// queued behind it in one transaction (joinBatch). Fails with crew.ErrNotFound, crew.ErrFull or
// crew.ErrAlreadyMember.
//
// What is replayed: a successful join (guard.OutcomeCreated with its JoinResult), from the
// idempotency record or from the marker committed with the membership. Rejections are not
// replayed: their key is dropped so the client may retry.
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
		Fingerprint:    guard.Fingerprint("crew.join", []string{cmd.CrewID}, nil),
		LockKey:        "crew:" + cmd.CrewID,
		Outcome:        guard.OutcomeCreated,
		Precheck: func(ctx context.Context) error {
			return s.rejectEarly(ctx, cmd.CrewID, cmd.UserID)
		},
	}
	return s.joins.Run(ctx, req, joinInput{crewID: cmd.CrewID, userID: cmd.UserID})
}

// rejectEarly answers a join of a crew this instance recently saw full without queueing for
// the lock: once a crew fills, the rest of a stampede hears CREW_FULL at once. A member asking
// again hears ALREADY_MEMBER, as under the lock. joinBatch re-checks everything under the row
// lock, so a stale hint can only refuse early, never over-fill.
func (s *Service) rejectEarly(ctx context.Context, crewID, userID string) error {
	if !s.full.has(crewID) {
		return nil
	}
	already, err := s.members.Existing(ctx, crewID, []string{userID})
	if err != nil {
		return fmt.Errorf("check membership: %w", err)
	}
	if already[userID] {
		return crew.ErrAlreadyMember
	}
	return crew.ErrFull
}

// joinBatch seats a batch of joins of one crew in one transaction: the crew row FOR UPDATE, one
// membership read for the batch when seats are short, one multi-row INSERT, one count UPDATE. Each join gets its own
// answer; a user already a member, or twice in the batch, hears ALREADY_MEMBER, and joins past
// the capacity hear CREW_FULL. The UNIQUE index still decides any race the lock missed: a
// duplicate from the INSERT fails the batch, and the guard re-runs each join alone.
func (s *Service) joinBatch(ctx context.Context, batch []joinInput) ([]guard.Answer[JoinResult], error) {
	crewID := batch[0].crewID
	answers := make([]guard.Answer[JoinResult], len(batch))
	err := s.tx.InTx(ctx, func(ctx context.Context) error {
		clear(answers)
		c, err := s.crews.GetForUpdate(ctx, crewID)
		if errors.Is(err, crew.ErrNotFound) {
			for i := range answers {
				answers[i].Err = crew.ErrNotFound
			}
			return nil
		}
		if err != nil {
			return err
		}
		if c.Remaining() <= 0 {
			// Committed state read under the row lock: the crew is full for everyone.
			s.full.learn(crewID)
		}
		userIDs := make([]string, len(batch))
		for i, in := range batch {
			userIDs[i] = in.userID
		}
		// With a seat for every join, the UNIQUE index alone can tell a member asking again: its
		// duplicate fails the batch, which the guard re-runs one by one. Without, members must be
		// known first, so that they neither take a seat nor hear CREW_FULL.
		var existing map[string]bool
		if c.Remaining() < len(batch) {
			if existing, err = s.members.Existing(ctx, crewID, userIDs); err != nil {
				return fmt.Errorf("check membership: %w", err)
			}
		}
		now := s.clock.Now()
		joined, verdicts := c.JoinAll(userIDs, existing, now)
		// Each join hears the member count right after its own seat, as if seated one by one.
		members := c.CurrentMembers() - len(joined)
		for i, in := range batch {
			if answers[i].Err = verdicts[i]; answers[i].Err != nil {
				continue
			}
			members++
			answers[i].Value = JoinResult{CrewID: c.ID(), UserID: in.userID, JoinedAt: now,
				CurrentMembers: members, MaxMembers: c.MaxMembers()}
		}
		if len(joined) == 0 {
			return nil
		}
		if err := s.members.Add(ctx, joined...); err != nil {
			return err
		}
		if err := s.crews.Save(ctx, c); err != nil {
			return fmt.Errorf("save crew: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return answers, nil
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
	err := s.tx.InTx(ctx, func(ctx context.Context) error {
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
	if err == nil {
		s.full.forget(cmd.CrewID)
	}
	return err
}

// fullHints remembers, per crew, when this instance last saw it full.
type fullHints struct {
	clock ports.Clock
	ttl   time.Duration
	seen  sync.Map // crew id → time.Time
}

func (h *fullHints) learn(crewID string) { h.seen.Store(crewID, h.clock.Now()) }

func (h *fullHints) forget(crewID string) { h.seen.Delete(crewID) }

func (h *fullHints) has(crewID string) bool {
	at, ok := h.seen.Load(crewID)
	if !ok {
		return false
	}
	if h.clock.Now().Sub(at.(time.Time)) >= h.ttl {
		h.seen.CompareAndDelete(crewID, at)
		return false
	}
	return true
}
