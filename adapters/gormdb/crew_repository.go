package gormdb

import (
	"context"
	"database/sql"
	"time"

	"gorm.io/gorm"

	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.CrewRepository       = (*CrewRepository)(nil)
	_ ports.CrewMemberRepository = (*CrewMemberRepository)(nil)
)

// crewRow is a row of the crews table.
type crewRow struct {
	ID             string    `gorm:"column:id;primaryKey"`
	Name           string    `gorm:"column:name"`
	MaxMembers     int       `gorm:"column:max_members"`
	CurrentMembers int       `gorm:"column:current_members"`
	CreatedAt      time.Time `gorm:"column:created_at;autoCreateTime:false"`
}

func (crewRow) TableName() string { return "crews" }

func (r crewRow) toDomain() *crew.Crew {
	return crew.Rebuild(r.ID, r.Name, r.MaxMembers, r.CurrentMembers, r.CreatedAt.UTC())
}

// memberRow is a row of the crew_members table.
type memberRow struct {
	CrewID   string    `gorm:"column:crew_id;primaryKey"`
	UserID   string    `gorm:"column:user_id;primaryKey"`
	JoinedAt time.Time `gorm:"column:joined_at"`
}

func (memberRow) TableName() string { return "crew_members" }

func (r memberRow) toDomain() crew.Member {
	return crew.Member{CrewID: r.CrewID, UserID: r.UserID, JoinedAt: r.JoinedAt.UTC()}
}

// CrewRepository stores crews; it implements ports.CrewRepository.
type CrewRepository struct {
	db *DB
	// Hand-written hot statement (see statement.go), bound to db's dialect once.
	getForUpdateSQL string
}

// saveCrewSQL writes a crew's member count; the write is held back when it can be (Save).
const saveCrewSQL = "UPDATE crews SET current_members = ? WHERE id = ?"

// NewCrewRepository returns the crew repository of db.
func NewCrewRepository(db *DB) *CrewRepository {
	return &CrewRepository{
		db:              db,
		getForUpdateSQL: Bind(db.dialect, "SELECT id, name, max_members, current_members, created_at FROM crews WHERE id = ? FOR UPDATE"),
	}
}

// Create inserts a new crew.
func (r *CrewRepository) Create(ctx context.Context, c *crew.Crew) error {
	s, done := r.db.session(ctx)
	defer done()
	row := crewRow{
		ID:             c.ID(),
		Name:           c.Name(),
		MaxMembers:     c.MaxMembers(),
		CurrentMembers: c.CurrentMembers(),
		CreatedAt:      c.CreatedAt().UTC(),
	}
	return translate(s.Create(&row).Error, errorMeanings{op: "create crew"})
}

// Get returns the crew, or crew.ErrNotFound.
func (r *CrewRepository) Get(ctx context.Context, id string) (*crew.Crew, error) {
	var row crewRow
	err := r.db.read(ctx, func(s *gorm.DB) error { return s.Where("id = ?", id).Take(&row).Error })
	if err != nil {
		return nil, translate(err, errorMeanings{op: "get crew", notFound: crew.ErrNotFound})
	}
	return row.toDomain(), nil
}

// GetForUpdate reads the crew with SELECT ... FOR UPDATE, locking its row until the transaction
// in ctx ends. Outside TxRunner.InTx it fails: the lock would be released at once.
func (r *CrewRepository) GetForUpdate(ctx context.Context, id string) (*crew.Crew, error) {
	if _, ok := r.db.transaction(ctx); !ok {
		return nil, errNoTransaction
	}
	var row crewRow
	found, err := r.db.queryOneLocking(ctx, "crews", id, errorMeanings{op: "get crew for update"}, r.getForUpdateSQL, []any{id}, func(rows *sql.Rows) error {
		return rows.Scan(&row.ID, &row.Name, &row.MaxMembers, &row.CurrentMembers, &row.CreatedAt)
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, crew.ErrNotFound
	}
	r.db.lockRow(ctx, "crews", id)
	return row.toDomain(), nil
}

// Save writes the crew's member count, the only field that changes after creation. The
// crews_members_within_capacity constraint rejects a count below zero or above the capacity.
// In a transaction that read the crew FOR UPDATE the row is sure to be there, so the write is
// held back to go out with the transaction's next statement (see writebuffer.go), and a
// refusal comes back from that statement or the commit.
func (r *CrewRepository) Save(ctx context.Context, c *crew.Crew) error {
	meanings := errorMeanings{op: "save crew"}
	if r.db.holdsRow(ctx, "crews", c.ID()) {
		return r.db.deferWrite(ctx, pendingWrite{table: "crews", meanings: meanings, query: saveCrewSQL,
			args: []any{c.CurrentMembers(), c.ID()}})
	}
	updated, err := r.db.exec(ctx, meanings, Bind(r.db.dialect, saveCrewSQL), c.CurrentMembers(), c.ID())
	if err != nil {
		return err
	}
	if updated == 0 {
		return crew.ErrNotFound
	}
	return nil
}

// CrewMemberRepository stores crew members; it implements ports.CrewMemberRepository.
type CrewMemberRepository struct {
	db *DB
}

// NewCrewMemberRepository returns the crew member repository of db.
func NewCrewMemberRepository(db *DB) *CrewMemberRepository {
	return &CrewMemberRepository{db: db}
}

// Add inserts the members in one multi-row INSERT, so the database applies all or none. The
// primary key (crew_id, user_id) rejects the statement with crew.ErrAlreadyMember when any pair
// exists, even one a concurrent transaction inserted first; a member of an unknown crew is
// crew.ErrNotFound. A call carries at most 21,845 members (three parameters each, and both
// databases take at most 65,535 per statement). In a transaction the INSERT is held back to go
// out with the transaction's next statement (see writebuffer.go), and its errors come back from
// that statement or the commit.
func (r *CrewMemberRepository) Add(ctx context.Context, members ...crew.Member) error {
	if len(members) == 0 {
		return nil
	}
	args := make([]any, 0, 3*len(members))
	for _, m := range members {
		args = append(args, m.CrewID, m.UserID, m.JoinedAt.UTC())
	}
	return r.db.deferWrite(ctx, pendingWrite{
		table: "crew_members",
		meanings: errorMeanings{
			op:        "add crew members",
			notFound:  crew.ErrNotFound,
			duplicate: crew.ErrAlreadyMember,
		},
		query: "INSERT INTO crew_members (crew_id, user_id, joined_at) VALUES " + tuples(len(members), 3),
		args:  args,
	})
}

// Existing returns which of userIDs are members of the crew, in one SELECT on the primary key.
func (r *CrewMemberRepository) Existing(ctx context.Context, crewID string, userIDs []string) (map[string]bool, error) {
	return r.db.usersAmong(ctx, "find existing crew members", "crew_members", "crew_id", crewID, userIDs)
}

// Remove deletes the member, or returns crew.ErrNotMember when there is none.
func (r *CrewMemberRepository) Remove(ctx context.Context, crewID, userID string) error {
	s, done := r.db.session(ctx)
	defer done()
	res := s.Where("crew_id = ? AND user_id = ?", crewID, userID).Delete(&memberRow{})
	if res.Error != nil {
		return translate(res.Error, errorMeanings{op: "remove crew member"})
	}
	if res.RowsAffected == 0 {
		return crew.ErrNotMember
	}
	return nil
}

// Count returns the number of members of the crew.
func (r *CrewMemberRepository) Count(ctx context.Context, crewID string) (int, error) {
	var n int64
	err := r.db.read(ctx, func(s *gorm.DB) error { return s.Model(&memberRow{}).Where("crew_id = ?", crewID).Count(&n).Error })
	if err != nil {
		return 0, translate(err, errorMeanings{op: "count crew members"})
	}
	return int(n), nil
}

// List returns up to limit members of the crew ordered by (JoinedAt, UserID), starting after the
// cursor when one is given. It seeks by keyset on the (crew_id, joined_at, user_id) index, so
// late pages cost as little as the first.
func (r *CrewMemberRepository) List(ctx context.Context, crewID string, after *ports.MemberCursor, limit int) ([]crew.Member, error) {
	if limit <= 0 {
		return []crew.Member{}, nil
	}
	var rows []memberRow
	err := r.db.read(ctx, func(s *gorm.DB) error {
		q := s.Where("crew_id = ?", crewID)
		if after != nil {
			// The portable spelling of (joined_at, user_id) > (?, ?).
			at := after.JoinedAt.UTC()
			q = q.Where("(joined_at > ? OR (joined_at = ? AND user_id > ?))", at, at, after.UserID)
		}
		return q.Order("joined_at, user_id").Limit(limit).Find(&rows).Error
	})
	if err != nil {
		return nil, translate(err, errorMeanings{op: "list crew members"})
	}
	members := make([]crew.Member, len(rows))
	for i, row := range rows {
		members[i] = row.toDomain()
	}
	return members, nil
}

// NewCrewStores returns the crew repositories of db.
func NewCrewStores(db *DB) ports.CrewStores {
	return ports.CrewStores{Crews: NewCrewRepository(db), CrewMembers: NewCrewMemberRepository(db)}
}
