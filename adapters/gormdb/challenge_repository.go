package gormdb

import (
	"context"
	"database/sql"
	"time"

	"github.com/rushgate/rushgate/domain/challenge"
	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.ChallengeRepository     = (*ChallengeRepository)(nil)
	_ ports.UploadSessionRepository = (*UploadSessionRepository)(nil)
	_ ports.VerificationRepository  = (*VerificationRepository)(nil)
)

// The challenge flow's statements are all hand-written (statement.go): its verification runs two
// row locks, an insert and an update per request on the hot path.

// nullIfEmpty stores an optional id: NULL when it is empty.
func nullIfEmpty(id string) sql.NullString { return sql.NullString{String: id, Valid: id != ""} }

const challengeColumns = "id, crew_id, title, deadline, created_at"

// ChallengeRepository stores challenges; it implements ports.ChallengeRepository.
type ChallengeRepository struct {
	db                                 *DB
	createSQL, getSQL, getForUpdateSQL string
}

// NewChallengeRepository returns the challenge repository of db.
func NewChallengeRepository(db *DB) *ChallengeRepository {
	get := "SELECT " + challengeColumns + " FROM challenges WHERE id = ?"
	return &ChallengeRepository{
		db:              db,
		createSQL:       Bind(db.dialect, "INSERT INTO challenges ("+challengeColumns+") VALUES "+tuples(1, 5)),
		getSQL:          Bind(db.dialect, get),
		getForUpdateSQL: Bind(db.dialect, get+" FOR UPDATE"),
	}
}

// Create inserts a challenge.
func (r *ChallengeRepository) Create(ctx context.Context, c challenge.Challenge) error {
	_, err := r.db.exec(ctx, errorMeanings{op: "create challenge"}, r.createSQL,
		c.ID(), nullIfEmpty(c.CrewID()), c.Title(), c.Deadline().UTC(), c.CreatedAt().UTC())
	return err
}

// Get returns the challenge, or challenge.ErrNotFound.
func (r *ChallengeRepository) Get(ctx context.Context, id string) (challenge.Challenge, error) {
	return r.read(ctx, "get challenge", r.getSQL, id)
}

// GetForUpdate reads the challenge with SELECT ... FOR UPDATE, locking its row until the
// transaction in ctx ends. Outside TxRunner.InTx it fails.
func (r *ChallengeRepository) GetForUpdate(ctx context.Context, id string) (challenge.Challenge, error) {
	if _, ok := r.db.transaction(ctx); !ok {
		return challenge.Challenge{}, errNoTransaction
	}
	return r.read(ctx, "get challenge for update", r.getForUpdateSQL, id)
}

func (r *ChallengeRepository) read(ctx context.Context, op, query, id string) (challenge.Challenge, error) {
	var (
		crewID              sql.NullString
		title               string
		deadline, createdAt time.Time
	)
	found, err := r.db.queryOne(ctx, errorMeanings{op: op}, query, []any{id}, func(rows *sql.Rows) error {
		return rows.Scan(&id, &crewID, &title, &deadline, &createdAt)
	})
	if err != nil {
		return challenge.Challenge{}, err
	}
	if !found {
		return challenge.Challenge{}, challenge.ErrNotFound
	}
	return challenge.RebuildChallenge(id, crewID.String, title, deadline.UTC(), createdAt.UTC()), nil
}

const sessionColumns = "id, user_id, challenge_id, object_key, file_name, content_type, file_size, status, requested_at"

// UploadSessionRepository stores upload sessions; it implements ports.UploadSessionRepository.
type UploadSessionRepository struct {
	db                                                         *DB
	createSQL, getSQL, getForUpdateSQL, completeSQL, expireSQL string
}

// NewUploadSessionRepository returns the upload session repository of db.
func NewUploadSessionRepository(db *DB) *UploadSessionRepository {
	get := "SELECT " + sessionColumns + " FROM upload_sessions WHERE id = ?"
	return &UploadSessionRepository{
		db:              db,
		createSQL:       Bind(db.dialect, "INSERT INTO upload_sessions ("+sessionColumns+") VALUES "+tuples(1, 9)),
		getSQL:          Bind(db.dialect, get),
		getForUpdateSQL: Bind(db.dialect, get+" FOR UPDATE"),
		completeSQL:     Bind(db.dialect, "UPDATE upload_sessions SET status = 'COMPLETED' WHERE id = ? AND status = 'PENDING'"),
		expireSQL:       Bind(db.dialect, expireStatement(db.dialect)),
	}
}

// expireStatement expires at most a limit of the oldest PENDING sessions requested before a
// time, in one conditional UPDATE. Postgres has no UPDATE … LIMIT, so it picks the rows in a
// materialised CTE (an IN subquery may be rescanned, and with SKIP LOCKED each rescan picks
// other rows) that skips rows other transactions hold locked (another worker's batch, a
// verification in flight), and re-checks status on the rows it gets; MySQL limits the UPDATE
// directly, and InnoDB re-reads each row's latest committed version under its lock, so a
// session completed or expired meanwhile no longer matches.
func expireStatement(d Dialect) string {
	if d == Postgres {
		return "WITH picked AS MATERIALIZED (SELECT id FROM upload_sessions WHERE status = 'PENDING' " +
			"AND requested_at < ? ORDER BY requested_at LIMIT ? FOR UPDATE SKIP LOCKED) " +
			"UPDATE upload_sessions SET status = 'EXPIRED' FROM picked " +
			"WHERE upload_sessions.id = picked.id AND upload_sessions.status = 'PENDING'"
	}
	return "UPDATE upload_sessions SET status = 'EXPIRED' WHERE status = 'PENDING' AND requested_at < ? " +
		"ORDER BY requested_at LIMIT ?"
}

// Create inserts a session.
func (r *UploadSessionRepository) Create(ctx context.Context, s challenge.UploadSession) error {
	_, err := r.db.exec(ctx, errorMeanings{op: "create upload session"}, r.createSQL,
		s.ID(), s.UserID(), nullIfEmpty(s.ChallengeID()), s.ObjectKey(), s.FileName(), s.ContentType(), s.FileSize(),
		string(s.Status()), s.RequestedAt().UTC())
	return err
}

// Get returns the session, or challenge.ErrInvalidSession.
func (r *UploadSessionRepository) Get(ctx context.Context, id string) (challenge.UploadSession, error) {
	return r.read(ctx, "get upload session", r.getSQL, id)
}

// GetForUpdate reads the session with SELECT ... FOR UPDATE, locking its row until the
// transaction in ctx ends. Outside TxRunner.InTx it fails.
func (r *UploadSessionRepository) GetForUpdate(ctx context.Context, id string) (challenge.UploadSession, error) {
	if _, ok := r.db.transaction(ctx); !ok {
		return challenge.UploadSession{}, errNoTransaction
	}
	return r.read(ctx, "get upload session for update", r.getForUpdateSQL, id)
}

func (r *UploadSessionRepository) read(ctx context.Context, op, query, id string) (challenge.UploadSession, error) {
	var (
		userID, objectKey, fileName, contentType, status string
		challengeID                                      sql.NullString
		fileSize                                         int64
		requestedAt                                      time.Time
	)
	found, err := r.db.queryOne(ctx, errorMeanings{op: op}, query, []any{id}, func(rows *sql.Rows) error {
		return rows.Scan(&id, &userID, &challengeID, &objectKey, &fileName, &contentType, &fileSize, &status, &requestedAt)
	})
	if err != nil {
		return challenge.UploadSession{}, err
	}
	if !found {
		return challenge.UploadSession{}, challenge.ErrInvalidSession
	}
	return challenge.RebuildUploadSession(id, userID, challengeID.String, objectKey, fileName, contentType, fileSize,
		challenge.SessionStatus(status), requestedAt.UTC()), nil
}

// Complete turns the PENDING session COMPLETED with a conditional UPDATE.
func (r *UploadSessionRepository) Complete(ctx context.Context, id string) error {
	updated, err := r.db.exec(ctx, errorMeanings{op: "complete upload session"}, r.completeSQL, id)
	if err != nil {
		return err
	}
	if updated == 0 {
		return challenge.ErrSessionAlreadyUsed
	}
	return nil
}

// Expire runs one expiring UPDATE (expireStatement) and returns how many sessions it changed.
func (r *UploadSessionRepository) Expire(ctx context.Context, requestedBefore time.Time, limit int) (int, error) {
	n, err := r.db.exec(ctx, errorMeanings{op: "expire upload sessions"}, r.expireSQL, requestedBefore.UTC(), limit)
	return int(n), err
}

const verificationColumns = "id, user_id, challenge_id, upload_session_id, image_key, status, requested_at"

// VerificationRepository stores verifications; it implements ports.VerificationRepository.
type VerificationRepository struct {
	db     *DB
	addSQL string
}

// NewVerificationRepository returns the verification repository of db.
func NewVerificationRepository(db *DB) *VerificationRepository {
	return &VerificationRepository{
		db:     db,
		addSQL: Bind(db.dialect, "INSERT INTO verifications ("+verificationColumns+") VALUES "+tuples(1, 7)),
	}
}

// Add inserts the verification; the two UNIQUE keys name the duplicate it is.
func (r *VerificationRepository) Add(ctx context.Context, v challenge.Verification) error {
	_, err := r.db.exec(ctx, errorMeanings{
		op:       "add verification",
		notFound: challenge.ErrNotFound,
		duplicateByKey: map[string]error{
			"verifications_one_per_user":    challenge.ErrAlreadyVerified,
			"verifications_one_per_session": challenge.ErrSessionAlreadyUsed,
		},
	}, r.addSQL, v.ID(), v.UserID(), v.ChallengeID(), v.UploadSessionID(), v.ImageKey(), v.Status(), v.RequestedAt().UTC())
	return err
}

// List returns up to limit verifications of the challenge in id order, by keyset on the
// (challenge_id, id) index.
func (r *VerificationRepository) List(ctx context.Context, challengeID, userID, afterID string, limit int) ([]challenge.Verification, error) {
	page := []challenge.Verification{}
	if limit <= 0 {
		return page, nil
	}
	query := "SELECT " + verificationColumns + " FROM verifications WHERE challenge_id = ? AND id > ?"
	args := []any{challengeID, afterID}
	if userID != "" {
		query += " AND user_id = ?"
		args = append(args, userID)
	}
	query += " ORDER BY id LIMIT ?"
	args = append(args, limit)
	err := r.db.query(ctx, errorMeanings{op: "list verifications"}, Bind(r.db.dialect, query), args, func(rows *sql.Rows) error {
		var (
			id, userID, challengeID, sessionID, imageKey, status string
			requestedAt                                          time.Time
		)
		if err := rows.Scan(&id, &userID, &challengeID, &sessionID, &imageKey, &status, &requestedAt); err != nil {
			return err
		}
		page = append(page, challenge.RebuildVerification(id, userID, challengeID, sessionID, imageKey, status, requestedAt.UTC()))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// NewVerificationStores returns the challenge verification repositories of db.
func NewVerificationStores(db *DB) ports.VerificationStores {
	return ports.VerificationStores{
		Challenges:     NewChallengeRepository(db),
		UploadSessions: NewUploadSessionRepository(db),
		Verifications:  NewVerificationRepository(db),
	}
}
