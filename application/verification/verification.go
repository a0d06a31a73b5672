// Package verification holds the challenge verification use cases: create and read
// challenges, open an upload session with a presigned upload, verify a session's image for a
// challenge (guarded), list verifications, and expire abandoned sessions. It depends on ports
// only, so another Go service can embed it with its own adapters.
package verification

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/challenge"
	"github.com/rushgate/rushgate/ports"
)

// Defaults of Config's durations.
const (
	DefaultUploadURLExpiry = 5 * time.Minute
	DefaultSessionExpiry   = 30 * time.Minute
)

// maxImageKeyLength bounds imageKey, as the object_key columns do.
const maxImageKeyLength = 512

// Config tunes the use cases; a zero field takes the default named beside it.
type Config struct {
	Files           challenge.FileRules // challenge.DefaultMaxFileBytes
	UploadURLExpiry time.Duration       // DefaultUploadURLExpiry: how long a presigned URL works
	SessionExpiry   time.Duration       // DefaultSessionExpiry: a session older than this is refused and expired
	MaxBatch        int                 // guard.DefaultMaxBatch: verifications of one lock key per transaction
	// Timeout, the database's timeout, bounds a verification's database work in all: its
	// precheck's reads (its session, then its challenge), then its batch's transaction, but not
	// its wait for the lock nor its storage check (guard.Budget). Alone, each would take a
	// timeout of its own, and a slow database would hold the request for their sum. Zero: no
	// bound of its own.
	Timeout time.Duration
}

// Deps are the ports and the guard the use cases run on.
type Deps struct {
	Tx            ports.TxRunner
	Challenges    ports.ChallengeRepository
	Sessions      ports.UploadSessionRepository
	Verifications ports.VerificationRepository
	Crews         ports.CrewRepository
	Storage       ports.ObjectStorage
	Guard         *guard.Guard
	Clock         ports.Clock
	IDs           ports.IDGenerator
}

// Service runs the verification use cases.
type Service struct {
	d        Deps
	cfg      Config
	verifies *guard.Lane[verifyInput, View]
}

// NewService wires the use cases to their ports.
func NewService(d Deps, cfg Config) *Service {
	if cfg.UploadURLExpiry <= 0 {
		cfg.UploadURLExpiry = DefaultUploadURLExpiry
	}
	if cfg.SessionExpiry <= 0 {
		cfg.SessionExpiry = DefaultSessionExpiry
	}
	s := &Service{d: d, cfg: cfg}
	s.verifies = guard.NewLane(d.Guard, guard.LaneConfig{MaxBatch: cfg.MaxBatch, Markers: true}, s.verifyBatch)
	return s
}

// ChallengeView is a challenge as clients see it.
type ChallengeView struct {
	ID        string
	CrewID    *string
	Title     string
	Deadline  time.Time
	CreatedAt time.Time
}

func challengeViewOf(c challenge.Challenge) ChallengeView {
	v := ChallengeView{ID: c.ID(), Title: c.Title(), Deadline: c.Deadline(), CreatedAt: c.CreatedAt()}
	if crewID := c.CrewID(); crewID != "" {
		v.CrewID = &crewID
	}
	return v
}

// CreateChallengeCommand creates a challenge; CrewID is optional and must name a crew.
type CreateChallengeCommand struct {
	Title    string
	Deadline time.Time
	CrewID   string
}

// CreateChallenge validates and stores a challenge. A CrewID naming no crew is
// crew.ErrNotFound.
func (s *Service) CreateChallenge(ctx context.Context, cmd CreateChallengeCommand) (ChallengeView, error) {
	c, err := challenge.NewChallenge(s.d.IDs.NewID(), cmd.CrewID, cmd.Title, cmd.Deadline, s.d.Clock.Now())
	if err != nil {
		return ChallengeView{}, err
	}
	if c.CrewID() != "" {
		if _, err := s.d.Crews.Get(ctx, c.CrewID()); err != nil {
			return ChallengeView{}, err
		}
	}
	if err := s.d.Challenges.Create(ctx, c); err != nil {
		return ChallengeView{}, fmt.Errorf("create challenge: %w", err)
	}
	return challengeViewOf(c), nil
}

// GetChallenge returns one challenge or challenge.ErrNotFound.
func (s *Service) GetChallenge(ctx context.Context, id string) (ChallengeView, error) {
	if err := domain.ValidateUUID("challengeId", id); err != nil {
		return ChallengeView{}, err
	}
	c, err := s.d.Challenges.Get(ports.AllowStale(ctx), id)
	if err != nil {
		return ChallengeView{}, err
	}
	return challengeViewOf(c), nil
}

// SessionCommand declares the file a user is about to upload.
type SessionCommand struct {
	UserID      string
	FileName    string
	ContentType string
	FileSize    int64
}

// SessionView is an opened upload session: where and how to PUT the file.
type SessionView struct {
	SessionID       string
	PresignedURL    string
	ExpiresIn       int // seconds
	ObjectKey       string
	RequiredHeaders map[string]string
}

// CreateUploadSession checks the declared file (challenge.ErrUnsupportedFile), stores a PENDING
// session requested now, and presigns a PUT of exactly that file to a fresh key under the
// user's prefix. Nobody can guess another user's key: it is named by the session id, whose
// time-ordered UUIDv7 carries 74 random bits, and a further 128 random bits.
func (s *Service) CreateUploadSession(ctx context.Context, cmd SessionCommand) (SessionView, error) {
	file := challenge.DeclaredFile{Name: cmd.FileName, ContentType: cmd.ContentType, Size: cmd.FileSize}
	session, err := challenge.OpenSession(s.d.IDs.NewID(), cmd.UserID, file, s.cfg.Files, strings.ToLower(rand.Text()), s.d.Clock.Now())
	if err != nil {
		return SessionView{}, err
	}
	if err := s.d.Sessions.Create(ctx, session); err != nil {
		return SessionView{}, fmt.Errorf("create upload session: %w", err)
	}
	upload, err := s.d.Storage.PresignPut(ctx, ports.UploadGrant{
		Key: session.ObjectKey(), ContentType: session.ContentType(), ContentLength: session.FileSize(), Expiry: s.cfg.UploadURLExpiry,
	})
	if err != nil {
		return SessionView{}, fmt.Errorf("presign upload: %w", err)
	}
	return SessionView{SessionID: session.ID(), PresignedURL: upload.URL, ExpiresIn: int(s.cfg.UploadURLExpiry / time.Second),
		ObjectKey: session.ObjectKey(), RequiredHeaders: upload.RequiredHeaders}, nil
}

// VerifyCommand asks to verify challengeID with the image of sessionID; IdempotencyKey is
// required.
type VerifyCommand struct {
	UserID         string
	SessionID      string
	ChallengeID    string
	ImageKey       string
	IdempotencyKey string
}

// View is a verification as clients see it.
type View struct {
	ID              string
	UserID          string
	ChallengeID     string
	UploadSessionID string
	ImageKey        string
	Status          string
	RequestedAt     time.Time
}

func viewOf(v challenge.Verification) View {
	return View{ID: v.ID(), UserID: v.UserID(), ChallengeID: v.ChallengeID(), UploadSessionID: v.UploadSessionID(),
		ImageKey: v.ImageKey(), Status: v.Status(), RequestedAt: v.RequestedAt()}
}

// verifyInput is one verification waiting in its (challenge, user) lane.
type verifyInput struct {
	userID, sessionID, challengeID, imageKey string
}

// Verify records the user's verification of a challenge through the guard:
// idempotency; then, before any lock or transaction, the same checks read without locks and the
// object check — the object exists with the session's declared size and its first bytes are an
// image of the declared type (challenge.ErrImageNotUploaded) — so storage round trips never
// run inside a transaction; then the lock verification:{challengeId}:{userId}, whose holder
// re-checks everything under row locks and writes (verifyBatch).
//
// A successful verification is replayed (201) for its key; rejections drop the key.
func (s *Service) Verify(ctx context.Context, cmd VerifyCommand) (guard.Result[View], error) {
	if err := s.validate(cmd); err != nil {
		return guard.Result[View]{}, err
	}
	budget := guard.NewBudget(s.cfg.Timeout)
	req := guard.Request{
		UserID:         cmd.UserID,
		IdempotencyKey: cmd.IdempotencyKey,
		Fingerprint:    guard.Fingerprint("verification.submit", []string{cmd.ChallengeID, cmd.SessionID, cmd.ImageKey}, nil),
		LockKey:        "verification:" + cmd.ChallengeID + ":" + cmd.UserID,
		Outcome:        guard.OutcomeCreated,
		Precheck:       func(ctx context.Context) error { return s.precheck(ctx, cmd, budget) },
		Budget:         budget,
	}
	return s.verifies.Run(ctx, req, verifyInput{userID: cmd.UserID, sessionID: cmd.SessionID, challengeID: cmd.ChallengeID, imageKey: cmd.ImageKey})
}

func (s *Service) validate(cmd VerifyCommand) error {
	if err := domain.ValidateUserID("userId", cmd.UserID); err != nil {
		return err
	}
	if err := domain.ValidateUUID("sessionId", cmd.SessionID); err != nil {
		return err
	}
	if err := domain.ValidateUUID("challengeId", cmd.ChallengeID); err != nil {
		return err
	}
	return domain.ValidateText("imageKey", cmd.ImageKey, maxImageKeyLength)
}

// precheck runs the checks of verifyBatch on committed state without locks, in the same order,
// its reads spending budget, then checks the object. A request it passes is checked again under
// the locks.
func (s *Service) precheck(ctx context.Context, cmd VerifyCommand, budget *guard.Budget) error {
	session, err := s.readChecked(ctx, cmd, budget)
	if err != nil {
		return err
	}
	return s.checkObject(ctx, session)
}

// readChecked reads cmd's session and challenge within budget and checks them.
func (s *Service) readChecked(ctx context.Context, cmd VerifyCommand, budget *guard.Budget) (challenge.UploadSession, error) {
	ctx, spent := budget.Spend(ctx)
	defer spent()
	session, err := s.d.Sessions.Get(ctx, cmd.SessionID)
	if err != nil {
		return challenge.UploadSession{}, err
	}
	if err := session.CheckUse(cmd.UserID, cmd.ImageKey, s.d.Clock.Now(), s.cfg.SessionExpiry); err != nil {
		return challenge.UploadSession{}, err
	}
	c, err := s.d.Challenges.Get(ctx, cmd.ChallengeID)
	if err != nil {
		return challenge.UploadSession{}, err
	}
	if !c.Accepts(session.RequestedAt()) {
		return challenge.UploadSession{}, challenge.ErrDeadlinePassed
	}
	return session, nil
}

// checkObject makes sure the session's object was uploaded as declared: present, of the
// declared size, starting with the declared image type's signature.
func (s *Service) checkObject(ctx context.Context, session challenge.UploadSession) error {
	size, err := s.d.Storage.Stat(ctx, session.ObjectKey())
	if errors.Is(err, ports.ErrObjectNotFound) {
		return challenge.ImageNotUploaded("no object was uploaded under imageKey")
	}
	if err != nil {
		return fmt.Errorf("stat uploaded image: %w", err)
	}
	if err := session.CheckStoredSize(size); err != nil {
		return err
	}
	head, err := s.d.Storage.ReadHead(ctx, session.ObjectKey(), challenge.SniffBytes)
	if errors.Is(err, ports.ErrObjectNotFound) {
		return challenge.ImageNotUploaded("no object was uploaded under imageKey")
	}
	if err != nil {
		return fmt.Errorf("read uploaded image: %w", err)
	}
	return session.CheckStoredHead(head)
}

// verifyBatch serves verifications of one (challenge, user) in one transaction, each in this
// order: session FOR UPDATE (missing, another user's or expired: INVALID_SESSION;
// COMPLETED: SESSION_ALREADY_USED; imageKey not its key: INVALID_IMAGE_KEY), challenge FOR
// UPDATE (unknown: CHALLENGE_NOT_FOUND; session requested at or after the deadline:
// DEADLINE_PASSED), then INSERT the verification and complete the session. A request after a
// success in the same batch sees the session COMPLETED, or hears ALREADY_VERIFIED for another
// session. A UNIQUE violation from the INSERT (a verification committed by a transaction the
// lock did not serialise) fails the batch; the guard re-runs each request alone, which then
// hears the violation's error.
func (s *Service) verifyBatch(ctx context.Context, batch []verifyInput) ([]guard.Answer[View], error) {
	answers := make([]guard.Answer[View], len(batch))
	err := s.d.Tx.InTx(ctx, func(ctx context.Context) error {
		clear(answers)
		if err := s.lockSessions(ctx, batch); err != nil {
			return err
		}
		now := s.d.Clock.Now()
		verified := false
		for i, in := range batch {
			session, c, err := s.checkLocked(ctx, in, now)
			if _, rejected := domain.AsError(err); rejected {
				answers[i].Err = err
				continue
			}
			if err != nil {
				return err
			}
			if verified {
				// The batch's lane is one (challenge, user): it verified with another session.
				answers[i].Err = challenge.ErrAlreadyVerified
				continue
			}
			v, err := challenge.Verify(s.d.IDs.NewID(), session, c)
			if err != nil {
				return err // checkLocked passed what Verify checks: not a rejection
			}
			if err := s.d.Verifications.Add(ctx, v); err != nil {
				return err
			}
			if err := s.d.Sessions.Complete(ctx, session.ID()); err != nil {
				return err
			}
			verified = true
			answers[i].Value = viewOf(v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return answers, nil
}

// lockSessions locks the sessions of a batch that holds more than one, in id order, before the
// challenge. Each request locks its session and then the challenge, so the batch's later
// sessions would be locked after the challenge and in order of arrival: the batch of another of
// the user's challenges, holding some of the same sessions in another order, would wait for this
// one while this one waits for it, a deadlock that fails both lanes' queues once the
// transaction's retries are spent. In one global order, sessions by id and then the challenge,
// two batches never wait for each other in a cycle. A missing session is left to checkLocked
// to answer.
func (s *Service) lockSessions(ctx context.Context, batch []verifyInput) error {
	ids := make([]string, len(batch))
	for i, in := range batch {
		ids[i] = in.sessionID
	}
	slices.Sort(ids)
	if ids = slices.Compact(ids); len(ids) < 2 {
		return nil
	}
	for _, id := range ids {
		if _, err := s.d.Sessions.GetForUpdate(ctx, id); err != nil && !errors.Is(err, challenge.ErrInvalidSession) {
			return err
		}
	}
	return nil
}

// checkLocked locks and checks the session, then the challenge, in that order; a domain
// error is the request's rejection.
func (s *Service) checkLocked(ctx context.Context, in verifyInput, now time.Time) (challenge.UploadSession, challenge.Challenge, error) {
	session, err := s.d.Sessions.GetForUpdate(ctx, in.sessionID)
	if err != nil {
		return challenge.UploadSession{}, challenge.Challenge{}, err
	}
	if err := session.CheckUse(in.userID, in.imageKey, now, s.cfg.SessionExpiry); err != nil {
		return challenge.UploadSession{}, challenge.Challenge{}, err
	}
	c, err := s.d.Challenges.GetForUpdate(ctx, in.challengeID)
	if err != nil {
		return challenge.UploadSession{}, challenge.Challenge{}, err
	}
	if !c.Accepts(session.RequestedAt()) {
		return challenge.UploadSession{}, challenge.Challenge{}, challenge.ErrDeadlinePassed
	}
	return session, c, nil
}

// VerificationPage is one page of verifications; NextCursor is nil on the last page.
type VerificationPage struct {
	Items      []View
	NextCursor *string
}

// ListCommand asks for a page of a challenge's verifications: the caller's own, or everyone's
// for an admin. Limit 0 means domain.DefaultPageLimit.
type ListCommand struct {
	ChallengeID string
	UserID      string
	Admin       bool
	Limit       int
	Cursor      string
}

// ListVerifications pages through a challenge's verifications in creation order.
func (s *Service) ListVerifications(ctx context.Context, cmd ListCommand) (VerificationPage, error) {
	if err := domain.ValidateUUID("challengeId", cmd.ChallengeID); err != nil {
		return VerificationPage{}, err
	}
	limit, err := domain.PageLimit(cmd.Limit)
	if err != nil {
		return VerificationPage{}, err
	}
	after, err := decodeCursor(cmd.Cursor)
	if err != nil {
		return VerificationPage{}, err
	}
	if _, err := s.d.Challenges.Get(ctx, cmd.ChallengeID); err != nil {
		return VerificationPage{}, err
	}
	owner := cmd.UserID
	if cmd.Admin {
		owner = ""
	}
	// One extra row tells whether another page follows.
	rows, err := s.d.Verifications.List(ctx, cmd.ChallengeID, owner, after, limit+1)
	if err != nil {
		return VerificationPage{}, fmt.Errorf("list verifications: %w", err)
	}
	page := VerificationPage{Items: make([]View, 0, min(len(rows), limit))}
	for i, v := range rows {
		if i == limit {
			next := base64.RawURLEncoding.EncodeToString([]byte(rows[i-1].ID()))
			page.NextCursor = &next
			break
		}
		page.Items = append(page.Items, viewOf(v))
	}
	return page, nil
}

func decodeCursor(cursor string) (string, error) {
	if cursor == "" {
		return "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || domain.ValidateUUID("cursor", string(raw)) != nil {
		return "", domain.Invalid("cursor", "is not a cursor this server issued")
	}
	return string(raw), nil
}

// ExpireSessions marks PENDING sessions older than the session expiry EXPIRED, in rounds of at
// most limit (one transaction each), until a round finds fewer. It returns how many it expired.
// Several instances may run it at once: each session is expired once.
func (s *Service) ExpireSessions(ctx context.Context, limit int) (int, error) {
	before := s.d.Clock.Now().Add(-s.cfg.SessionExpiry)
	total := 0
	for {
		var n int
		err := s.d.Tx.InTx(ctx, func(ctx context.Context) error {
			var err error
			n, err = s.d.Sessions.Expire(ctx, before, limit)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("expire upload sessions: %w", err)
		}
		total += n
		if n < limit {
			return total, nil
		}
	}
}
