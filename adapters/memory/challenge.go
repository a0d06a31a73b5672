package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rushgate/rushgate/domain/challenge"
	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.ChallengeRepository     = (*ChallengeRepository)(nil)
	_ ports.UploadSessionRepository = (*UploadSessionRepository)(nil)
	_ ports.VerificationRepository  = (*VerificationRepository)(nil)
)

func challengeKeyOf(c challenge.Challenge) string { return c.ID() }

var challengesTable = declareTable("challenges", challengeKeyOf)

func sessionKeyOf(s challenge.UploadSession) string { return s.ID() }

var sessionsTable = declareTable("upload_sessions", sessionKeyOf)

// verificationKey is the unique key (challengeId, userId) of a verification.
type verificationKey struct {
	challengeID, userID string
}

func verificationKeyOf(v challenge.Verification) verificationKey {
	return verificationKey{v.ChallengeID(), v.UserID()}
}

var verificationsTable = declarePartitionedTable("verifications", verificationKeyOf, verificationKey.challenge)

// challenge partitions the verifications table by challenge, for List.
func (k verificationKey) challenge() string { return k.challengeID }

// verificationSessionKeyOf is the unique key of the verifications' session index.
func verificationSessionKeyOf(v challenge.Verification) string { return v.UploadSessionID() }

// verificationSessionsTable is the verifications' UNIQUE(uploadSessionId) index.
var verificationSessionsTable = declareTable("verifications_by_session", verificationSessionKeyOf)

// ChallengeRepository stores challenges in a Database.
type ChallengeRepository struct{ db *Database }

// NewChallengeRepository returns a ChallengeRepository on d.
func NewChallengeRepository(d *Database) *ChallengeRepository { return &ChallengeRepository{db: d} }

// Create inserts c; an existing id is a duplicate-key error.
func (r *ChallengeRepository) Create(ctx context.Context, c challenge.Challenge) error {
	return r.db.run(ctx, func(t *tx) error { return challengesTable.in(r.db).insert(ctx, t, c) })
}

// Get returns the challenge or challenge.ErrNotFound.
func (r *ChallengeRepository) Get(ctx context.Context, id string) (challenge.Challenge, error) {
	return readRow(ctx, r.db, challengesTable.in(r.db), id, false, challenge.ErrNotFound)
}

// GetForUpdate locks the challenge's row until ctx's transaction ends, then returns it or
// challenge.ErrNotFound. It fails outside InTx.
func (r *ChallengeRepository) GetForUpdate(ctx context.Context, id string) (challenge.Challenge, error) {
	return readRow(ctx, r.db, challengesTable.in(r.db), id, true, challenge.ErrNotFound)
}

// readRow reads k's row of tb as one statement, or notFound; forUpdate locks it for the rest of
// the transaction (SELECT ... FOR UPDATE) and fails outside InTx.
func readRow[K comparable, V any](ctx context.Context, d *Database, tb *table[K, V], k K, forUpdate bool, notFound error) (V, error) {
	var found V
	statement := d.run
	if forUpdate {
		statement = d.runInTx
	}
	err := statement(ctx, func(t *tx) error {
		var (
			row V
			ok  bool
			err error
		)
		if forUpdate {
			row, ok, err = tb.getForUpdate(ctx, t, k)
		} else {
			row, ok = tb.get(t, k)
		}
		if err != nil {
			return err
		}
		if !ok {
			return notFound
		}
		found = row
		return nil
	})
	return found, err
}

// UploadSessionRepository stores upload sessions in a Database.
type UploadSessionRepository struct{ db *Database }

// NewUploadSessionRepository returns an UploadSessionRepository on d.
func NewUploadSessionRepository(d *Database) *UploadSessionRepository {
	return &UploadSessionRepository{db: d}
}

// Create inserts s; an existing id is a duplicate-key error.
func (r *UploadSessionRepository) Create(ctx context.Context, s challenge.UploadSession) error {
	return r.db.run(ctx, func(t *tx) error { return sessionsTable.in(r.db).insert(ctx, t, s) })
}

// Get returns the session or challenge.ErrInvalidSession.
func (r *UploadSessionRepository) Get(ctx context.Context, id string) (challenge.UploadSession, error) {
	return readRow(ctx, r.db, sessionsTable.in(r.db), id, false, challenge.ErrInvalidSession)
}

// GetForUpdate locks the session's row until ctx's transaction ends, then returns it or
// challenge.ErrInvalidSession. It fails outside InTx.
func (r *UploadSessionRepository) GetForUpdate(ctx context.Context, id string) (challenge.UploadSession, error) {
	return readRow(ctx, r.db, sessionsTable.in(r.db), id, true, challenge.ErrInvalidSession)
}

// Complete turns the PENDING session COMPLETED under its row lock.
func (r *UploadSessionRepository) Complete(ctx context.Context, id string) error {
	return r.db.run(ctx, func(t *tx) error {
		changed, err := r.update(ctx, t, id, func(s *challenge.UploadSession) bool { return s.Complete() == nil })
		if err != nil {
			return err
		}
		if !changed {
			return challenge.ErrSessionAlreadyUsed
		}
		return nil
	})
}

// Expire turns up to limit PENDING sessions requested before requestedBefore EXPIRED, oldest
// first. Each candidate is re-read under its row lock, as a conditional UPDATE re-checks its
// WHERE, so a session completed meanwhile is left alone and two callers expire it once.
func (r *UploadSessionRepository) Expire(ctx context.Context, requestedBefore time.Time, limit int) (int, error) {
	var expired int
	err := r.db.run(ctx, func(t *tx) error {
		old := sessionsTable.in(r.db).filter(t, func(s challenge.UploadSession) bool {
			return s.Status() == challenge.SessionPending && s.RequestedAt().Before(requestedBefore)
		})
		slices.SortFunc(old, func(a, b challenge.UploadSession) int {
			return cmp.Or(a.RequestedAt().Compare(b.RequestedAt()), cmp.Compare(a.ID(), b.ID()))
		})
		for _, s := range old[:min(max(limit, 0), len(old))] {
			changed, err := r.update(ctx, t, s.ID(), (*challenge.UploadSession).Expire)
			if err != nil {
				return err
			}
			if changed {
				expired++
			}
		}
		return nil
	})
	return expired, err
}

// update locks the session and writes it back when change, the session's own transition out
// of PENDING, reports that it changed it.
func (r *UploadSessionRepository) update(ctx context.Context, t *tx, id string, change func(*challenge.UploadSession) bool) (bool, error) {
	s, ok, err := sessionsTable.in(r.db).getForUpdate(ctx, t, id)
	if err != nil || !ok || !change(&s) {
		return false, err
	}
	return true, sessionsTable.in(r.db).put(ctx, t, s)
}

// VerificationRepository stores verifications in a Database.
type VerificationRepository struct{ db *Database }

// NewVerificationRepository returns a VerificationRepository on d.
func NewVerificationRepository(d *Database) *VerificationRepository {
	return &VerificationRepository{db: d}
}

// Add inserts v. Like the two UNIQUE indexes, it locks the (challengeId, userId) and session
// keys for the rest of the transaction, so a concurrent duplicate waits and then fails.
func (r *VerificationRepository) Add(ctx context.Context, v challenge.Verification) error {
	return r.db.run(ctx, func(t *tx) error {
		if _, ok := challengesTable.in(r.db).get(t, v.ChallengeID()); !ok {
			return fmt.Errorf("memory: add verification: foreign key challenge %q: %w", v.ChallengeID(), challenge.ErrNotFound)
		}
		if err := verificationsTable.in(r.db).insert(ctx, t, v); err != nil {
			if errors.Is(err, errDuplicateKey) {
				return challenge.ErrAlreadyVerified
			}
			return err
		}
		if err := verificationSessionsTable.in(r.db).insert(ctx, t, v); err != nil {
			if errors.Is(err, errDuplicateKey) {
				return challenge.ErrSessionAlreadyUsed
			}
			return err
		}
		return nil
	})
}

// List returns up to limit verifications of the challenge ordered by ID, after afterID, only
// userID's when it is set.
func (r *VerificationRepository) List(ctx context.Context, challengeID, userID, afterID string, limit int) ([]challenge.Verification, error) {
	var page []challenge.Verification
	err := r.db.run(ctx, func(t *tx) error {
		all := verificationsTable.in(r.db).rowsIn(t, challengeID)
		all = slices.DeleteFunc(all, func(v challenge.Verification) bool {
			return (userID != "" && v.UserID() != userID) || v.ID() <= afterID
		})
		slices.SortFunc(all, func(a, b challenge.Verification) int { return cmp.Compare(a.ID(), b.ID()) })
		page = all[:min(max(limit, 0), len(all))]
		return nil
	})
	return page, err
}

// NewVerificationStores returns the challenge verification repositories on d.
func NewVerificationStores(d *Database) ports.VerificationStores {
	return ports.VerificationStores{
		Challenges:     NewChallengeRepository(d),
		UploadSessions: NewUploadSessionRepository(d),
		Verifications:  NewVerificationRepository(d),
	}
}
