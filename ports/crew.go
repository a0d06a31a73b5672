package ports

import (
	"context"
	"time"

	"github.com/rushgate/rushgate/domain/crew"
)

// CrewRepository stores crews.
//
// Get returns crew.ErrNotFound for an unknown id. GetForUpdate does the same but must run inside
// TxRunner.InTx and locks the crew's row until that transaction ends: concurrent GetForUpdate
// callers on one crew run one after another, each seeing the previous one's committed writes.
// Save writes the crew's member count.
type CrewRepository interface {
	Create(ctx context.Context, c *crew.Crew) error
	Get(ctx context.Context, id string) (*crew.Crew, error)
	GetForUpdate(ctx context.Context, id string) (*crew.Crew, error)
	Save(ctx context.Context, c *crew.Crew) error
}

// MemberCursor is the position after which a member page starts: members are ordered by
// (JoinedAt, UserID).
type MemberCursor struct {
	JoinedAt time.Time
	UserID   string
}

// CrewMemberRepository stores crew members.
//
// Add inserts members in one statement, all or none. It enforces UNIQUE(crewId, userId) in
// storage and returns crew.ErrAlreadyMember, inserting none, when any pair exists, including when
// a concurrent transaction inserted it first; a member of an unknown crew is crew.ErrNotFound.
// Inside TxRunner.InTx an adapter may hold Add's write, and Save's after GetForUpdate, back to
// send them with the transaction's next statement: their errors then come back from that
// statement (IdempotencyMarkerRepository.Save, say) or from InTx.
// Existing returns which of userIDs are members of crewID, in one read (users who are not are
// absent from the set). Remove returns crew.ErrNotMember when there is nothing to remove. List
// returns up to limit members of a crew ordered by (JoinedAt, UserID), starting after the
// cursor when one is given.
type CrewMemberRepository interface {
	Add(ctx context.Context, members ...crew.Member) error
	Existing(ctx context.Context, crewID string, userIDs []string) (map[string]bool, error)
	Remove(ctx context.Context, crewID, userID string) error
	Count(ctx context.Context, crewID string) (int, error)
	List(ctx context.Context, crewID string, after *MemberCursor, limit int) ([]crew.Member, error)
}
