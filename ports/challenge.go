package ports

import (
	"context"
	"errors"
	"time"

	"github.com/rushgate/rushgate/domain/challenge"
)

// ChallengeRepository stores challenges.
//
// Get returns challenge.ErrNotFound for an unknown id. GetForUpdate does the same but must run
// inside TxRunner.InTx and locks the challenge's row until that transaction ends.
type ChallengeRepository interface {
	Create(ctx context.Context, c challenge.Challenge) error
	Get(ctx context.Context, id string) (challenge.Challenge, error)
	GetForUpdate(ctx context.Context, id string) (challenge.Challenge, error)
}

// UploadSessionRepository stores upload sessions.
//
// Get returns challenge.ErrInvalidSession for an unknown id. GetForUpdate does the same but must
// run inside TxRunner.InTx and locks the session's row until that transaction ends, so a
// concurrent GetForUpdate, Complete or Expire of it waits and then sees this transaction's
// writes. Complete turns a PENDING session COMPLETED and returns challenge.ErrSessionAlreadyUsed
// when it is not PENDING. Expire turns up to limit PENDING sessions requested before the given
// time EXPIRED, oldest first, and returns how many it changed; several callers at once change
// each session once, and a session a transaction holds locked is skipped or waited for, never
// expired after that transaction completed it.
type UploadSessionRepository interface {
	Create(ctx context.Context, s challenge.UploadSession) error
	Get(ctx context.Context, id string) (challenge.UploadSession, error)
	GetForUpdate(ctx context.Context, id string) (challenge.UploadSession, error)
	Complete(ctx context.Context, id string) error
	Expire(ctx context.Context, requestedBefore time.Time, limit int) (int, error)
}

// VerificationRepository stores verifications.
//
// Add inserts one; UNIQUE(challengeId, userId) refuses a second one of a user for a challenge
// with challenge.ErrAlreadyVerified and UNIQUE(uploadSessionId) a second one of a session with
// challenge.ErrSessionAlreadyUsed, including when a concurrent transaction inserted it first;
// an unknown challenge is challenge.ErrNotFound. List returns up to limit verifications of a
// challenge ordered by ID, after afterID when it is not empty, only userID's when userID is not
// empty.
type VerificationRepository interface {
	Add(ctx context.Context, v challenge.Verification) error
	List(ctx context.Context, challengeID, userID, afterID string, limit int) ([]challenge.Verification, error)
}

// ErrObjectNotFound means storage holds no object under the key.
var ErrObjectNotFound = errors.New("object not found")

// UploadGrant asks for a signed upload: a PUT of exactly ContentLength bytes of ContentType to
// Key, valid for Expiry at least (clients are told Expiry, so a URL that counts whole seconds
// rounds up, never down).
type UploadGrant struct {
	Key           string
	ContentType   string
	ContentLength int64
	Expiry        time.Duration
}

// PresignedUpload is what the client needs to upload: the URL to PUT to and the headers it must
// send with exactly these values, which the signature covers.
type PresignedUpload struct {
	URL             string
	RequiredHeaders map[string]string
}

// ObjectStorage holds uploaded objects.
//
// PresignPut signs a PUT without calling storage: storage accepts it only for grant.Key, with
// the Content-Type and Content-Length of the grant, until the expiry, and only while the key
// holds no object (an uploaded object is never replaced); anything else is refused and writes
// nothing. Stat returns the object's size, or ErrObjectNotFound. ReadHead returns the
// object's first n bytes (fewer when it is shorter) with one ranged read, or ErrObjectNotFound.
// Failures to reach storage wrap ErrUnavailable.
type ObjectStorage interface {
	PresignPut(ctx context.Context, grant UploadGrant) (PresignedUpload, error)
	Stat(ctx context.Context, key string) (size int64, err error)
	ReadHead(ctx context.Context, key string, n int) ([]byte, error)
}
