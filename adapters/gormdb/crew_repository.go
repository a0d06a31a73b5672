package gormdb

import (
	"context"
	"time"

	"gorm.io/gorm/clause"

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
}

// NewCrewRepository returns the crew repository of db.
func NewCrewRepository(db *DB) *CrewRepository { return &CrewRepository{db: db} }

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
	s, done := r.db.session(ctx)
	defer done()
	var row crewRow
	if err := s.Where("id = ?", id).Take(&row).Error; err != nil {
		return nil, translate(err, errorMeanings{op: "get crew", notFound: crew.ErrNotFound})
	}
	return row.toDomain(), nil
}

// GetForUpdate reads the crew with SELECT ... FOR UPDATE, locking its row until the transaction
// in ctx ends. Outside TxRunner.InTx it fails: the lock would be released at once.
func (r *CrewRepository) GetForUpdate(ctx context.Context, id string) (*crew.Crew, error) {
	tx, ok := r.db.transaction(ctx)
	if !ok {
		return nil, errNoTransaction
	}
	var row crewRow
	err := tx.WithContext(ctx).
		Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).
		Where("id = ?", id).
		Take(&row).Error
	if err != nil {
		return nil, translate(err, errorMeanings{op: "get crew for update", notFound: crew.ErrNotFound})
	}
	return row.toDomain(), nil
}

// Save writes the crew's member count, the only field that changes after creation.
func (r *CrewRepository) Save(ctx context.Context, c *crew.Crew) error {
	s, done := r.db.session(ctx)
	defer done()
	res := s.Model(&crewRow{}).Where("id = ?", c.ID()).Update("current_members", c.CurrentMembers())
	if res.Error != nil {
		return translate(res.Error, errorMeanings{op: "save crew"})
	}
	if res.RowsAffected == 0 {
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

// Add inserts the member. The primary key (crew_id, user_id) rejects a second insert of the pair
// with crew.ErrAlreadyMember, even from a concurrent transaction; an unknown crew is
// crew.ErrNotFound.
func (r *CrewMemberRepository) Add(ctx context.Context, m crew.Member) error {
	s, done := r.db.session(ctx)
	defer done()
	row := memberRow{CrewID: m.CrewID, UserID: m.UserID, JoinedAt: m.JoinedAt.UTC()}
	return translate(s.Create(&row).Error, errorMeanings{
		op:        "add crew member",
		notFound:  crew.ErrNotFound,
		duplicate: crew.ErrAlreadyMember,
	})
}

// Exists reports whether the user is a member of the crew.
func (r *CrewMemberRepository) Exists(ctx context.Context, crewID, userID string) (bool, error) {
	s, done := r.db.session(ctx)
	defer done()
	var n int64
	err := s.Model(&memberRow{}).Where("crew_id = ? AND user_id = ?", crewID, userID).Count(&n).Error
	if err != nil {
		return false, translate(err, errorMeanings{op: "check crew member"})
	}
	return n > 0, nil
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
	s, done := r.db.session(ctx)
	defer done()
	var n int64
	if err := s.Model(&memberRow{}).Where("crew_id = ?", crewID).Count(&n).Error; err != nil {
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
	s, done := r.db.session(ctx)
	defer done()
	q := s.Where("crew_id = ?", crewID)
	if after != nil {
		// The portable spelling of (joined_at, user_id) > (?, ?).
		at := after.JoinedAt.UTC()
		q = q.Where("(joined_at > ? OR (joined_at = ? AND user_id > ?))", at, at, after.UserID)
	}
	var rows []memberRow
	if err := q.Order("joined_at, user_id").Limit(limit).Find(&rows).Error; err != nil {
		return nil, translate(err, errorMeanings{op: "list crew members"})
	}
	members := make([]crew.Member, len(rows))
	for i, row := range rows {
		members[i] = row.toDomain()
	}
	return members, nil
}
