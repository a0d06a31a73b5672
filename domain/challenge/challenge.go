// Package challenge is the photo-verification flow's domain (SPEC §2): challenges with a
// deadline, upload sessions that reserve an object key for one user's file, verifications that
// consume a session, the rules an uploaded file must meet, and their errors.
package challenge

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/rushgate/rushgate/domain"
)

// MaxTitleLength bounds a challenge's title.
const MaxTitleLength = 200

// Errors of the flow; the edge maps their codes to statuses.
var (
	ErrNotFound           = domain.NewError(domain.KindNotFound, "CHALLENGE_NOT_FOUND", "challenge not found")
	ErrUnsupportedFile    = domain.NewError(domain.KindInvalid, "UNSUPPORTED_FILE", "unsupported file")
	ErrInvalidSession     = domain.NewError(domain.KindInvalid, "INVALID_SESSION", "the upload session does not exist, is not yours or has expired")
	ErrSessionAlreadyUsed = domain.NewError(domain.KindConflict, "SESSION_ALREADY_USED", "the upload session has already been used for a verification")
	ErrInvalidImageKey    = domain.NewError(domain.KindInvalid, "INVALID_IMAGE_KEY", "imageKey is not the object key of the upload session")
	ErrImageNotUploaded   = domain.NewError(domain.KindInvalid, "IMAGE_NOT_UPLOADED", "the image was not uploaded as declared")
	ErrDeadlinePassed     = domain.NewError(domain.KindInvalid, "DEADLINE_PASSED", "the upload session was requested at or after the challenge's deadline")
	ErrAlreadyVerified    = domain.NewError(domain.KindConflict, "ALREADY_VERIFIED", "the user has already verified this challenge")
)

// Challenge is something users verify with a photo before its deadline.
type Challenge struct {
	ID        string
	CrewID    string // empty when the challenge belongs to no crew
	Title     string
	Deadline  time.Time
	CreatedAt time.Time
}

// NewChallenge validates and creates a challenge. crewID, when not empty, must be a UUID.
func NewChallenge(id, crewID, title string, deadline, now time.Time) (Challenge, error) {
	if err := domain.ValidateText("title", title, MaxTitleLength); err != nil {
		return Challenge{}, err
	}
	if crewID != "" {
		if err := domain.ValidateUUID("crewId", crewID); err != nil {
			return Challenge{}, err
		}
	}
	if deadline.IsZero() {
		return Challenge{}, domain.Invalid("deadline", "is required (RFC 3339)")
	}
	return Challenge{ID: id, CrewID: crewID, Title: title, Deadline: deadline.UTC().Truncate(time.Microsecond), CreatedAt: now}, nil
}

// Accepts reports whether a session requested at requestedAt is in time: strictly before the
// deadline (a session requested exactly at the deadline is late).
func (c Challenge) Accepts(requestedAt time.Time) bool { return requestedAt.Before(c.Deadline) }

// SessionStatus is an upload session's state.
type SessionStatus string

// Session states: PENDING until a verification consumes it (COMPLETED) or it grows too old
// (EXPIRED).
const (
	SessionPending   SessionStatus = "PENDING"
	SessionCompleted SessionStatus = "COMPLETED"
	SessionExpired   SessionStatus = "EXPIRED"
)

// UploadSession reserves a server-chosen object key for one user's declared file.
type UploadSession struct {
	ID          string
	UserID      string
	ChallengeID string // empty: the session is not tied to a challenge
	ObjectKey   string
	FileName    string
	ContentType string
	FileSize    int64
	Status      SessionStatus
	RequestedAt time.Time // the server's clock when the session was created
}

// ExpiredAt reports whether the session is past its expiry at now: older than expiry, whether
// or not the expiry worker has marked it yet.
func (s UploadSession) ExpiredAt(now time.Time, expiry time.Duration) bool {
	return s.Status == SessionExpired || now.Sub(s.RequestedAt) > expiry
}

// CheckUse is the session's part of a verification, in SPEC §2's order: a session that is
// missing (the caller passes ok=false), another user's or expired is ErrInvalidSession, a
// completed one ErrSessionAlreadyUsed, and imageKey must be the session's object key.
func (s UploadSession) CheckUse(userID, imageKey string, now time.Time, expiry time.Duration) error {
	switch {
	case s.UserID != userID || s.ExpiredAt(now, expiry):
		return ErrInvalidSession
	case s.Status == SessionCompleted:
		return ErrSessionAlreadyUsed
	case s.ObjectKey != imageKey:
		return ErrInvalidImageKey
	}
	return nil
}

// VerificationApproved is the status every verification is created with.
const VerificationApproved = "APPROVED"

// Verification is a user's accepted photo for a challenge; (ChallengeID, UserID) and
// UploadSessionID are each unique.
type Verification struct {
	ID              string
	UserID          string
	ChallengeID     string
	UploadSessionID string
	ImageKey        string
	Status          string
	RequestedAt     time.Time // the session's requestedAt, which the deadline was judged by
}

// Verify creates the verification that consumes session s for challenge c.
func Verify(id string, s UploadSession, c Challenge) Verification {
	return Verification{ID: id, UserID: s.UserID, ChallengeID: c.ID, UploadSessionID: s.ID,
		ImageKey: s.ObjectKey, Status: VerificationApproved, RequestedAt: s.RequestedAt}
}

// Default file bounds (SPEC §2).
const (
	DefaultMaxFileBytes = 10 << 20
	MaxFileNameLength   = 255
)

// contentTypeByExtension is the one table of accepted files: extension → the content type it
// must be declared with.
var contentTypeByExtension = map[string]string{
	"jpg":  "image/jpeg",
	"jpeg": "image/jpeg",
	"png":  "image/png",
	"webp": "image/webp",
	"heic": "image/heic",
}

// FileRules are the bounds an upload must meet.
type FileRules struct {
	MaxBytes int64 // DefaultMaxFileBytes when zero
}

// Check validates a declared file and returns its lower-case extension: the name must be text,
// its extension one of jpg, jpeg, png, webp, heic, the content type the one of that extension,
// and the size 1..MaxBytes. A bad name is VALIDATION_FAILED; anything else ErrUnsupportedFile
// naming the field.
func (r FileRules) Check(fileName, contentType string, size int64) (string, error) {
	if err := domain.ValidateText("fileName", fileName, MaxFileNameLength); err != nil {
		return "", err
	}
	maxBytes := r.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFileBytes
	}
	ext := strings.ToLower(strings.TrimPrefix(path.Ext(fileName), "."))
	want, known := contentTypeByExtension[ext]
	switch {
	case !known:
		return "", unsupported("fileName", "the extension must be jpg, jpeg, png, webp or heic")
	case !strings.EqualFold(contentType, want):
		return "", unsupported("contentType", fmt.Sprintf("a .%s file must be declared %s", ext, want))
	case size < 1 || size > maxBytes:
		return "", unsupported("fileSize", fmt.Sprintf("must be between 1 and %d bytes", maxBytes))
	}
	return ext, nil
}

func unsupported(field, why string) *domain.Error {
	return ErrUnsupportedFile.WithMessage("unsupported file: " + field + ": " + why).
		WithDetails(map[string]any{"field": field})
}

// ContentTypeOf is the canonical content type of an accepted extension.
func ContentTypeOf(ext string) string { return contentTypeByExtension[ext] }

// SniffBytes is how many leading bytes IsImage needs.
const SniffBytes = 16

// heifBrands are the ISO-BMFF major brands of HEIC/HEIF still images.
var heifBrands = []string{"heic", "heix", "hevc", "hevx", "heim", "heis", "mif1", "msf1"}

// IsImage reports whether head, a file's first bytes, carries the signature of contentType:
// JPEG's SOI marker, PNG's eight-byte signature, a RIFF…WEBP header, or an ISO-BMFF ftyp box
// with a HEIF brand. A renamed executable or text file fails.
func IsImage(contentType string, head []byte) bool {
	switch strings.ToLower(contentType) {
	case "image/jpeg":
		return len(head) >= 3 && head[0] == 0xFF && head[1] == 0xD8 && head[2] == 0xFF
	case "image/png":
		return len(head) >= 8 && string(head[:8]) == "\x89PNG\r\n\x1a\n"
	case "image/webp":
		return len(head) >= 12 && string(head[:4]) == "RIFF" && string(head[8:12]) == "WEBP"
	case "image/heic":
		if len(head) < 12 || string(head[4:8]) != "ftyp" {
			return false
		}
		for _, brand := range heifBrands {
			if string(head[8:12]) == brand {
				return true
			}
		}
	}
	return false
}
