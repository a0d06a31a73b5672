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

// crewKeyOf is the crews table's primary key.
func crewKeyOf(c crew.Crew) string { return c.ID() }

var crewsTable = declareTable("crews", crewKeyOf)

// memberKey is the unique key (crewId, userId) of a member.
type memberKey struct {
	crewID, userID string
}

func memberKeyOf(m crew.Member) memberKey { return memberKey{m.CrewID, m.UserID} }

var membersTable = declarePartitionedTable("crew_members", memberKeyOf, memberKey.crew)

// crew partitions the members table by crew, for Count and List.
func (k memberKey) crew() string { return k.crewID }

// CrewRepository stores crews in a Database.
type CrewRepository struct {
	db *Database
}

// NewCrewRepository returns a CrewRepository on d.
func NewCrewRepository(d *Database) *CrewRepository { return &CrewRepository{db: d} }

// Create inserts c; an existing id is a duplicate-key error.
func (r *CrewRepository) Create(ctx context.Context, c *crew.Crew) error {
	return r.db.run(ctx, func(t *tx) error {
		return crewsTable.in(r.db).insert(ctx, t, *c)
	})
}

// Get returns a copy of the crew, or crew.ErrNotFound.
func (r *CrewRepository) Get(ctx context.Context, id string) (*crew.Crew, error) {
	var found crew.Crew
	err := r.db.run(ctx, func(t *tx) error {
		c, ok := crewsTable.in(r.db).get(t, id)
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
	var found crew.Crew
	err := r.db.runInTx(ctx, func(t *tx) error {
		c, ok, err := crewsTable.in(r.db).getForUpdate(ctx, t, id)
		if err != nil {
			return err
		}
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
		stored, ok, err := crewsTable.in(r.db).getForUpdate(ctx, t, c.ID())
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("memory: save crew %q: %w", c.ID(), crew.ErrNotFound)
		}
		return crewsTable.in(r.db).put(ctx, t, *crew.Rebuild(stored.ID(), stored.Name(), stored.MaxMembers(), c.CurrentMembers(), stored.CreatedAt()))
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

// Add inserts members in one statement, all or none. Like a UNIQUE index, it locks each
// (crewId, userId) key for the rest of the transaction, so a concurrent Add of the same pair
// waits and then fails with crew.ErrAlreadyMember if the other one commits. A member of an
// unknown crew violates the foreign key and wraps crew.ErrNotFound.
func (r *CrewMemberRepository) Add(ctx context.Context, members ...crew.Member) error {
	if len(members) == 0 {
		return nil
	}
	return r.db.run(ctx, func(t *tx) error {
		for _, m := range members {
			if _, ok := crewsTable.in(r.db).get(t, m.CrewID); !ok {
				return fmt.Errorf("memory: add member %q: foreign key crew %q: %w", m.UserID, m.CrewID, crew.ErrNotFound)
			}
		}
		err := membersTable.in(r.db).insert(ctx, t, members...)
		if errors.Is(err, errDuplicateKey) {
			return crew.ErrAlreadyMember
		}
		return err
	})
}

// Existing returns which of userIDs are members of crewID.
func (r *CrewMemberRepository) Existing(ctx context.Context, crewID string, userIDs []string) (map[string]bool, error) {
	existing := make(map[string]bool)
	err := r.db.run(ctx, func(t *tx) error {
		for _, userID := range userIDs {
			if _, ok := membersTable.in(r.db).get(t, memberKey{crewID, userID}); ok {
				existing[userID] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return existing, nil
}

// Remove deletes the membership, locking its key for the rest of the transaction, or returns
// crew.ErrNotMember when there is none.
func (r *CrewMemberRepository) Remove(ctx context.Context, crewID, userID string) error {
	return r.db.run(ctx, func(t *tx) error {
		deleted, err := membersTable.in(r.db).delete(ctx, t, memberKey{crewID, userID})
		if err != nil {
			return err
		}
		if !deleted {
			return crew.ErrNotMember
		}
		return nil
	})
}

// Count returns the number of members of crewID.
func (r *CrewMemberRepository) Count(ctx context.Context, crewID string) (int, error) {
	var n int
	err := r.db.run(ctx, func(t *tx) error {
		n = len(membersTable.in(r.db).rowsIn(t, crewID))
		return nil
	})
	return n, err
}

// List returns up to limit members of crewID ordered by (JoinedAt, UserID), starting after the
// cursor when one is given.
func (r *CrewMemberRepository) List(ctx context.Context, crewID string, after *ports.MemberCursor, limit int) ([]crew.Member, error) {
	var page []crew.Member
	err := r.db.run(ctx, func(t *tx) error {
		members := membersTable.in(r.db).rowsIn(t, crewID)
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

// NewCrewStores returns the crew repositories on d.
func NewCrewStores(d *Database) ports.CrewStores {
	return ports.CrewStores{Crews: NewCrewRepository(d), CrewMembers: NewCrewMemberRepository(d)}
}
