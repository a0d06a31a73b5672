package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.CrewRepository       = (*CrewRepository)(nil)
	_ ports.CrewMemberRepository = (*CrewMemberRepository)(nil)
)

// errDuplicateKey is a primary-key violation, like inserting a crew id twice.
var errDuplicateKey = errors.New("memory: duplicate key")

// Table names, used for row locks.
const (
	crewsTable   = "crews"
	membersTable = "crew_members"
)

// crew returns id's crew as t sees it: its own writes, else the committed row.
func (t *tx) crew(id string) (crew.Crew, bool) {
	if c, ok := t.crews[id]; ok {
		return c, true
	}
	t.db.mu.RLock()
	defer t.db.mu.RUnlock()
	c, ok := t.db.crews[id]
	return c, ok
}

// member reports whether key is a member as t sees it.
func (t *tx) member(key memberKey) bool {
	if w, ok := t.members[key]; ok {
		return !w.deleted
	}
	t.db.mu.RLock()
	defer t.db.mu.RUnlock()
	_, ok := t.db.members[key.crewID][key.userID]
	return ok
}

// crewMembers returns crewID's members as t sees them, in no particular order.
func (t *tx) crewMembers(crewID string) []crew.Member {
	t.db.mu.RLock()
	committed := t.db.members[crewID]
	members := make([]crew.Member, 0, len(committed))
	for userID, m := range committed {
		if _, overwritten := t.members[memberKey{crewID, userID}]; !overwritten {
			members = append(members, m)
		}
	}
	t.db.mu.RUnlock()
	for key, w := range t.members {
		if key.crewID == crewID && !w.deleted {
			members = append(members, w.member)
		}
	}
	return members
}

// CrewRepository stores crews in a Database.
type CrewRepository struct {
	db *Database
}

// NewCrewRepository returns a CrewRepository on d.
func NewCrewRepository(d *Database) *CrewRepository { return &CrewRepository{db: d} }

// Create inserts c; an existing id is a duplicate-key error.
func (r *CrewRepository) Create(ctx context.Context, c *crew.Crew) error {
	return r.db.run(ctx, func(t *tx) error {
		if err := t.lock(ctx, crewsTable, c.ID()); err != nil {
			return fmt.Errorf("memory: create crew %q: %w", c.ID(), err)
		}
		if _, exists := t.crew(c.ID()); exists {
			return fmt.Errorf("memory: create crew %q: %w", c.ID(), errDuplicateKey)
		}
		t.crews[c.ID()] = *c
		return nil
	})
}

// Get returns a copy of the crew, or crew.ErrNotFound.
func (r *CrewRepository) Get(ctx context.Context, id string) (*crew.Crew, error) {
	var found crew.Crew
	err := r.db.run(ctx, func(t *tx) error {
		c, ok := t.crew(id)
		if !ok {
			return crew.ErrNotFound
		}
		found = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &found, nil
}

// GetForUpdate locks the crew's row until ctx's transaction ends, waiting while another
// transaction holds it, then returns a copy of the crew or crew.ErrNotFound. It fails outside
// InTx.
func (r *CrewRepository) GetForUpdate(ctx context.Context, id string) (*crew.Crew, error) {
	if _, ok := ctx.Value(txKey{r.db}).(*tx); !ok {
		return nil, errNoTransaction
	}
	var found crew.Crew
	err := r.db.run(ctx, func(t *tx) error {
		if err := t.lock(ctx, crewsTable, id); err != nil {
			return fmt.Errorf("memory: get crew %q for update: %w", id, err)
		}
		c, ok := t.crew(id)
		if !ok {
			return crew.ErrNotFound
		}
		found = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &found, nil
}

// Save writes the crew's member count, locking its row for the rest of the transaction.
func (r *CrewRepository) Save(ctx context.Context, c *crew.Crew) error {
	return r.db.run(ctx, func(t *tx) error {
		if err := t.lock(ctx, crewsTable, c.ID()); err != nil {
			return fmt.Errorf("memory: save crew %q: %w", c.ID(), err)
		}
		stored, ok := t.crew(c.ID())
		if !ok {
			return fmt.Errorf("memory: save crew %q: %w", c.ID(), crew.ErrNotFound)
		}
		t.crews[c.ID()] = *crew.Rebuild(stored.ID(), stored.Name(), stored.MaxMembers(), c.CurrentMembers(), stored.CreatedAt())
		return nil
	})
}

// CrewMemberRepository stores crew members in a Database.
type CrewMemberRepository struct {
	db *Database
}

// NewCrewMemberRepository returns a CrewMemberRepository on d.
func NewCrewMemberRepository(d *Database) *CrewMemberRepository {
	return &CrewMemberRepository{db: d}
}

// Add inserts m. Like a UNIQUE index, it locks the (crewId, userId) key for the rest of the
// transaction, so a concurrent Add of the same pair waits and then fails with
// crew.ErrAlreadyMember if this one commits. An unknown crew violates the foreign key and wraps
// crew.ErrNotFound.
func (r *CrewMemberRepository) Add(ctx context.Context, m crew.Member) error {
	key := memberKey{m.CrewID, m.UserID}
	return r.db.run(ctx, func(t *tx) error {
		if err := t.lock(ctx, membersTable, key); err != nil {
			return fmt.Errorf("memory: add member %q to crew %q: %w", m.UserID, m.CrewID, err)
		}
		if t.member(key) {
			return crew.ErrAlreadyMember
		}
		if _, ok := t.crew(m.CrewID); !ok {
			return fmt.Errorf("memory: add member %q: foreign key crew %q: %w", m.UserID, m.CrewID, crew.ErrNotFound)
		}
		t.members[key] = memberWrite{member: m}
		return nil
	})
}

// Exists reports whether userID is a member of crewID.
func (r *CrewMemberRepository) Exists(ctx context.Context, crewID, userID string) (bool, error) {
	var exists bool
	err := r.db.run(ctx, func(t *tx) error {
		exists = t.member(memberKey{crewID, userID})
		return nil
	})
	return exists, err
}

// Remove deletes the membership, locking its key for the rest of the transaction, or returns
// crew.ErrNotMember when there is none.
func (r *CrewMemberRepository) Remove(ctx context.Context, crewID, userID string) error {
	key := memberKey{crewID, userID}
	return r.db.run(ctx, func(t *tx) error {
		if err := t.lock(ctx, membersTable, key); err != nil {
			return fmt.Errorf("memory: remove member %q from crew %q: %w", userID, crewID, err)
		}
		if !t.member(key) {
			return crew.ErrNotMember
		}
		t.members[key] = memberWrite{deleted: true}
		return nil
	})
}

// Count returns the number of members of crewID.
func (r *CrewMemberRepository) Count(ctx context.Context, crewID string) (int, error) {
	var n int
	err := r.db.run(ctx, func(t *tx) error {
		n = len(t.crewMembers(crewID))
		return nil
	})
	return n, err
}

// List returns up to limit members of crewID ordered by (JoinedAt, UserID), starting after the
// cursor when one is given.
func (r *CrewMemberRepository) List(ctx context.Context, crewID string, after *ports.MemberCursor, limit int) ([]crew.Member, error) {
	var page []crew.Member
	err := r.db.run(ctx, func(t *tx) error {
		members := t.crewMembers(crewID)
		if after != nil {
			members = slices.DeleteFunc(members, func(m crew.Member) bool { return compareToCursor(m, *after) <= 0 })
		}
		slices.SortFunc(members, func(a, b crew.Member) int {
			return compareToCursor(a, ports.MemberCursor{JoinedAt: b.JoinedAt, UserID: b.UserID})
		})
		page = members[:min(max(limit, 0), len(members))]
		return nil
	})
	return page, err
}

// compareToCursor orders m against a position in the (JoinedAt, UserID) order.
func compareToCursor(m crew.Member, c ports.MemberCursor) int {
	return cmp.Or(m.JoinedAt.Compare(c.JoinedAt), cmp.Compare(m.UserID, c.UserID))
}
