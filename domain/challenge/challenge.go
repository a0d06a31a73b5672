// Package challenge is the photo-verification flow's domain: challenges with a
// deadline, upload sessions that reserve an object key for one user's file, verifications that
// consume a session, the rules an uploaded file must meet, and their errors.
package challenge

import (
	"encoding/base64"
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
	id        string
	crewID    string // empty when the challenge belongs to no crew
	title     string
	deadline  time.Time
	createdAt time.Time
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
	if err := domain.ValidateInstant("deadline", deadline); err != nil {
		return Challenge{}, err
	}
	return Challenge{id: id, crewID: crewID, title: title, deadline: deadline.UTC().Truncate(time.Microsecond), createdAt: now}, nil
}

// RebuildChallenge restores a challenge from storage without re-validating; adapters only.
func RebuildChallenge(id, crewID, title string, deadline, createdAt time.Time) Challenge {
	return Challenge{id: id, crewID: crewID, title: title, deadline: deadline, createdAt: createdAt}
}

func (c Challenge) ID() string { return c.id }

// CrewID is the crew the challenge belongs to, "" when none.
func (c Challenge) CrewID() string       { return c.crewID }
func (c Challenge) Title() string        { return c.title }
func (c Challenge) Deadline() time.Time  { return c.deadline }
func (c Challenge) CreatedAt() time.Time { return c.createdAt }

// Accepts reports whether a session requested at requestedAt is in time: strictly before the
// deadline (a session requested exactly at the deadline is late).
func (c Challenge) Accepts(requestedAt time.Time) bool { return requestedAt.Before(c.deadline) }

// SessionStatus is an upload session's state.
type SessionStatus string

// Session states: PENDING until a verification consumes it (COMPLETED) or it grows too old
// (EXPIRED).
const (
	SessionPending   SessionStatus = "PENDING"
	SessionCompleted SessionStatus = "COMPLETED"
	SessionExpired   SessionStatus = "EXPIRED"
)

// DeclaredFile is the file a user says they are about to upload.
type DeclaredFile struct {
	Name        string
	ContentType string
	Size        int64
}

// UploadSession reserves a server-chosen object key for one user's declared file.
type UploadSession struct {
	id          string
	userID      string
	challengeID string // empty: the session is not tied to a challenge
	objectKey   string
	fileName    string
	contentType string
	fileSize    int64
	status      SessionStatus
	requestedAt time.Time // the server's clock when the session was created
}

// OpenSession validates a declared file against rules and creates the PENDING session of
// userID for it, requested now. Its object key lies under the user's own prefix (the user id in
// unpadded base64url, so any id is one safe path segment) and is named by the session id and
// keyToken, random lower-case letters and digits that make the key unguessable; its content
// type is the canonical one of the file's extension.
func OpenSession(id, userID string, file DeclaredFile, rules FileRules, keyToken string, now time.Time) (UploadSession, error) {
	if err := domain.ValidateUserID("userId", userID); err != nil {
		return UploadSession{}, err
	}
	ext, err := rules.Check(file.Name, file.ContentType, file.Size)
	if err != nil {
		return UploadSession{}, err
	}
	if keyToken == "" || strings.TrimFunc(keyToken, isLowerAlphanumeric) != "" {
		return UploadSession{}, fmt.Errorf("challenge: the object key token %q must be lower-case letters and digits", keyToken)
	}
	key := "uploads/" + base64.RawURLEncoding.EncodeToString([]byte(userID)) + "/" + id + "-" + keyToken + "." + ext
	return UploadSession{id: id, userID: userID, objectKey: key, fileName: file.Name, contentType: ContentTypeOf(ext),
		fileSize: file.Size, status: SessionPending, requestedAt: now}, nil
}

func isLowerAlphanumeric(r rune) bool { return ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') }

// RebuildUploadSession restores a session from storage without re-validating; adapters only.
func RebuildUploadSession(id, userID, challengeID, objectKey, fileName, contentType string, fileSize int64,
	status SessionStatus, requestedAt time.Time) UploadSession {
	return UploadSession{id: id, userID: userID, challengeID: challengeID, objectKey: objectKey, fileName: fileName,
		contentType: contentType, fileSize: fileSize, status: status, requestedAt: requestedAt}
}

func (s UploadSession) ID() string     { return s.id }
func (s UploadSession) UserID() string { return s.userID }

// ChallengeID is the challenge the session is tied to, "" when none.
func (s UploadSession) ChallengeID() string   { return s.challengeID }
func (s UploadSession) ObjectKey() string     { return s.objectKey }
func (s UploadSession) FileName() string      { return s.fileName }
func (s UploadSession) ContentType() string   { return s.contentType }
func (s UploadSession) FileSize() int64       { return s.fileSize }
func (s UploadSession) Status() SessionStatus { return s.status }

// RequestedAt is the server's clock when the session was created.
func (s UploadSession) RequestedAt() time.Time { return s.requestedAt }

// ExpiredAt reports whether the session is past its expiry at now: EXPIRED, or PENDING and
// older than expiry, whether or not the expiry worker has marked it yet. A COMPLETED session
// never expires: it stays used.
func (s UploadSession) ExpiredAt(now time.Time, expiry time.Duration) bool {
	return s.status == SessionExpired || s.status == SessionPending && now.Sub(s.requestedAt) > expiry
}

// CheckUse is the session's part of a verification, in this order: a session that is
// missing (the caller passes ok=false), another user's or expired is ErrInvalidSession, a
// completed one ErrSessionAlreadyUsed, and imageKey must be the session's object key.
func (s UploadSession) CheckUse(userID, imageKey string, now time.Time, expiry time.Duration) error {
	switch {
	case s.userID != userID || s.ExpiredAt(now, expiry):
		return ErrInvalidSession
	case s.status == SessionCompleted:
		return ErrSessionAlreadyUsed
	case s.objectKey != imageKey:
		return ErrInvalidImageKey
	}
	return nil
}

// CheckStoredSize returns ErrImageNotUploaded unless the stored object holds exactly the
// declared number of bytes, whatever the upload route let through.
func (s UploadSession) CheckStoredSize(size int64) error {
	if size != s.fileSize {
		return ImageNotUploaded(fmt.Sprintf("the object holds %d bytes, the session declared %d", size, s.fileSize))
	}
	return nil
}

// CheckStoredHead returns ErrImageNotUploaded unless head, the stored object's first
// SniffBytes bytes, carries the signature of the declared content type.
func (s UploadSession) CheckStoredHead(head []byte) error {
	if !IsImage(s.contentType, head) {
		return ImageNotUploaded("the object is not a " + s.contentType + " image")
	}
	return nil
}

// ImageNotUploaded refuses a verification whose object is missing or is not the declared file,
// saying why.
func ImageNotUploaded(why string) error {
	return ErrImageNotUploaded.WithMessage(ErrImageNotUploaded.Message + ": " + why)
}

// Complete turns a PENDING session COMPLETED, or returns ErrSessionAlreadyUsed and leaves it
// unchanged.
func (s *UploadSession) Complete() error {
	if s.status != SessionPending {
		return ErrSessionAlreadyUsed
	}
	s.status = SessionCompleted
	return nil
}

// Expire turns a PENDING session EXPIRED and reports whether it changed it: a completed
// session stays completed.
func (s *UploadSession) Expire() bool {
	if s.status != SessionPending {
		return false
	}
	s.status = SessionExpired
	return true
}

// VerificationApproved is the status every verification is created with.
const VerificationApproved = "APPROVED"

// Verification is a user's accepted photo for a challenge; (ChallengeID, UserID) and
// UploadSessionID are each unique.
type Verification struct {
	id              string
	userID          string
	challengeID     string
	uploadSessionID string
	imageKey        string
	status          string
	requestedAt     time.Time // the session's requestedAt, which the deadline was judged by
}

// Verify creates the APPROVED verification that consumes session s for challenge c: the
// session's user, object key and requestedAt. A session that is not PENDING is
// ErrSessionAlreadyUsed (an expired one ErrInvalidSession), one requested at or after c's
// deadline ErrDeadlinePassed. Marking the session COMPLETED is the caller's write.
func Verify(id string, s UploadSession, c Challenge) (Verification, error) {
	switch {
	case s.status == SessionExpired:
		return Verification{}, ErrInvalidSession
	case s.status != SessionPending:
		return Verification{}, ErrSessionAlreadyUsed
	case !c.Accepts(s.requestedAt):
		return Verification{}, ErrDeadlinePassed
	}
	return Verification{id: id, userID: s.userID, challengeID: c.id, uploadSessionID: s.id,
		imageKey: s.objectKey, status: VerificationApproved, requestedAt: s.requestedAt}, nil
}

// RebuildVerification restores a verification from storage without re-validating; adapters
// only.
func RebuildVerification(id, userID, challengeID, uploadSessionID, imageKey, status string, requestedAt time.Time) Verification {
	return Verification{id: id, userID: userID, challengeID: challengeID, uploadSessionID: uploadSessionID,
		imageKey: imageKey, status: status, requestedAt: requestedAt}
}

func (v Verification) ID() string              { return v.id }
func (v Verification) UserID() string          { return v.userID }
func (v Verification) ChallengeID() string     { return v.challengeID }
func (v Verification) UploadSessionID() string { return v.uploadSessionID }
func (v Verification) ImageKey() string        { return v.imageKey }
func (v Verification) Status() string          { return v.status }

// RequestedAt is the session's requestedAt, which the deadline was judged by.
func (v Verification) RequestedAt() time.Time { return v.requestedAt }

// Default file bounds.
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
// and the size 1..MaxBytes. A bad name or a missing content type is VALIDATION_FAILED; anything
// else ErrUnsupportedFile naming the field.
func (r FileRules) Check(fileName, contentType string, size int64) (string, error) {
	if err := domain.ValidateText("fileName", fileName, MaxFileNameLength); err != nil {
		return "", err
	}
	maxBytes := r.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFileBytes
	}
	if contentType == "" {
		return "", domain.Invalid("contentType", "is required")
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
