package challenge_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/challenge"
)

func TestFileRules_Check(t *testing.T) {
	rules := challenge.FileRules{MaxBytes: 100}
	for _, tc := range []struct {
		name, contentType string
		size              int64
		ext               string
		want              error
		field             string
	}{
		{"a.jpg", "image/jpeg", 1, "jpg", nil, ""},
		{"A.JPEG", "IMAGE/JPEG", 100, "jpeg", nil, ""},
		{"a.png", "image/png", 50, "png", nil, ""},
		{"a.webp", "image/webp", 50, "webp", nil, ""},
		{"a.heic", "image/heic", 50, "heic", nil, ""},
		{"virus.exe", "image/png", 50, "", challenge.ErrUnsupportedFile, "fileName"},
		{"noext", "image/png", 50, "", challenge.ErrUnsupportedFile, "fileName"},
		{"a.png", "image/jpeg", 50, "", challenge.ErrUnsupportedFile, "contentType"},
		{"a.png", "image/png", 0, "", challenge.ErrUnsupportedFile, "fileSize"},
		{"a.png", "image/png", 101, "", challenge.ErrUnsupportedFile, "fileSize"},
		{"", "image/png", 50, "", domain.ErrValidation, "fileName"},
	} {
		ext, err := rules.Check(tc.name, tc.contentType, tc.size)
		if ext != tc.ext || !errors.Is(err, tc.want) {
			t.Errorf("%q %q %d: %q %v, want %q %v", tc.name, tc.contentType, tc.size, ext, err, tc.ext, tc.want)
		}
		if de, ok := domain.AsError(err); ok && de.Details["field"] != tc.field {
			t.Errorf("%q: field %v, want %s", tc.name, de.Details["field"], tc.field)
		}
	}
	if _, err := (challenge.FileRules{}).Check("a.png", "image/png", challenge.DefaultMaxFileBytes+1); !errors.Is(err, challenge.ErrUnsupportedFile) {
		t.Errorf("default bound: %v", err)
	}
}

func TestIsImage_ReadsSignatures(t *testing.T) {
	exe := []byte("MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff\x00\x00")
	for _, tc := range []struct {
		contentType string
		head        []byte
		want        bool
	}{
		{"image/jpeg", []byte("\xff\xd8\xff\xe0\x00\x10JFIF"), true},
		{"image/png", []byte("\x89PNG\r\n\x1a\n\x00\x00"), true},
		{"image/webp", []byte("RIFF\x24\x00\x00\x00WEBPVP8 "), true},
		{"image/heic", []byte("\x00\x00\x00\x18ftypheic\x00\x00"), true},
		{"image/heic", []byte("\x00\x00\x00\x18ftypmif1\x00\x00"), true},
		{"image/heic", []byte("\x00\x00\x00\x18ftypisom\x00\x00"), false},
		{"image/jpeg", exe, false},
		// Near misses: all but one byte of a signature is not the signature.
		{"image/jpeg", []byte("\xff\xd8\x00\xe0\x00\x10JFIF"), false},
		{"image/jpeg", []byte("\xff\xd8"), false},
		{"image/png", []byte("\x89PNG\r\n\x1a\x00\x00\x00"), false},
		{"image/webp", []byte("RIFF\x24\x00\x00\x00WEBQVP8 "), false},
		{"image/heic", []byte("\x00\x00\x00\x18ftyqheic\x00\x00"), false},
		{"image/png", []byte("\xff\xd8\xff\xe0"), false},
		{"image/webp", []byte("RIFF\x24\x00\x00\x00WAVE"), false},
		{"image/png", []byte("\x89PN"), false},
		{"image/gif", []byte("GIF89a"), false},
	} {
		if got := challenge.IsImage(tc.contentType, tc.head); got != tc.want {
			t.Errorf("%s %q: %v, want %v", tc.contentType, tc.head, got, tc.want)
		}
	}
}

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func session(status challenge.SessionStatus, requestedAt time.Time) challenge.UploadSession {
	return challenge.RebuildUploadSession("s1", "u1", "", "k", "a.png", "image/png", 8, status, requestedAt)
}

func TestUploadSession_CheckUseInSpecOrder(t *testing.T) {
	s := session(challenge.SessionPending, now)
	completed := session(challenge.SessionCompleted, now)
	expired := session(challenge.SessionExpired, now)
	for _, tc := range []struct {
		s        challenge.UploadSession
		user, ik string
		at       time.Time
		want     error
	}{
		{s, "u1", "k", now.Add(30 * time.Minute), nil},
		{s, "u1", "k", now.Add(30*time.Minute + time.Microsecond), challenge.ErrInvalidSession},
		{s, "u2", "k", now, challenge.ErrInvalidSession},
		{expired, "u1", "k", now, challenge.ErrInvalidSession},
		{completed, "u1", "other", now, challenge.ErrSessionAlreadyUsed},
		{completed, "u1", "k", now.Add(time.Hour), challenge.ErrSessionAlreadyUsed}, // used stays used
		{s, "u1", "other", now, challenge.ErrInvalidImageKey},
	} {
		if err := tc.s.CheckUse(tc.user, tc.ik, tc.at, 30*time.Minute); !errors.Is(err, tc.want) {
			t.Errorf("%+v by %s: %v, want %v", tc.s, tc.user, err, tc.want)
		}
	}
	c := challenge.RebuildChallenge("c1", "", "t", now, now)
	if c.Accepts(now) || !c.Accepts(now.Add(-time.Microsecond)) {
		t.Error("a session requested at the deadline must be late, one before it in time")
	}
}

func TestNewChallenge_ValidatesAndTruncatesTheDeadline(t *testing.T) {
	deadline := time.Date(2026, 2, 1, 9, 0, 0, 123456789, time.FixedZone("KST", 9*3600))
	for _, tc := range []struct {
		name, crewID, title string
		deadline            time.Time
		field               string
	}{
		{"empty title", "", "", deadline, "title"},
		{"title too long", "", strings.Repeat("t", challenge.MaxTitleLength+1), deadline, "title"},
		{"crew id not a UUID", "crew-1", "t", deadline, "crewId"},
		{"no deadline", "", "t", time.Time{}, "deadline"},
	} {
		_, err := challenge.NewChallenge("c1", tc.crewID, tc.title, tc.deadline, now)
		if de, ok := domain.AsError(err); !ok || de.Code != domain.CodeValidationFailed || de.Details["field"] != tc.field {
			t.Errorf("%s: %v, want VALIDATION_FAILED naming %s", tc.name, err, tc.field)
		}
	}
	crewID := "0190a0b0-0000-7000-8000-000000000001"
	c, err := challenge.NewChallenge("c1", crewID, "t", deadline, now)
	if err != nil || c.ID() != "c1" || c.CrewID() != crewID || c.Title() != "t" || !c.CreatedAt().Equal(now) {
		t.Fatalf("challenge %+v, %v", c, err)
	}
	if want := time.Date(2026, 2, 1, 0, 0, 0, 123456000, time.UTC); c.Deadline() != want {
		t.Fatalf("deadline %v, want %v (UTC, whole microseconds, as storage keeps it)", c.Deadline(), want)
	}
}

func TestOpenSession(t *testing.T) {
	rules := challenge.FileRules{MaxBytes: 100}
	png := challenge.DeclaredFile{Name: "Photo.PNG", ContentType: "IMAGE/PNG", Size: 42}
	s, err := challenge.OpenSession("s1", "user/1", png, rules, "abc123", now)
	if err != nil {
		t.Fatal(err)
	}
	// The user id "user/1" is one segment under uploads/ (base64url), the session names the file.
	if s.ObjectKey() != "uploads/dXNlci8x/s1-abc123.png" || s.ContentType() != "image/png" || s.FileName() != "Photo.PNG" ||
		s.FileSize() != 42 || s.Status() != challenge.SessionPending || !s.RequestedAt().Equal(now) ||
		s.ID() != "s1" || s.UserID() != "user/1" || s.ChallengeID() != "" {
		t.Fatalf("session %+v", s)
	}
	if _, err := challenge.OpenSession("s1", "", png, rules, "abc123", now); !errors.Is(err, domain.ErrValidation) {
		t.Errorf("no user: %v", err)
	}
	tooBig := png
	tooBig.Size = 101
	if _, err := challenge.OpenSession("s1", "u1", tooBig, rules, "abc123", now); !errors.Is(err, challenge.ErrUnsupportedFile) {
		t.Errorf("a file past the rules' bound: %v", err)
	}
	for _, token := range []string{"", "ABC", "../x", ".hidden", "a/b"} {
		if _, err := challenge.OpenSession("s1", "u1", png, rules, token, now); err == nil {
			t.Errorf("key token %q accepted", token)
		}
	}
}

func TestUploadSession_CompleteAndExpireOnlyFromPending(t *testing.T) {
	s := session(challenge.SessionPending, now)
	if err := s.Complete(); err != nil || s.Status() != challenge.SessionCompleted {
		t.Fatalf("complete: %v, %s", err, s.Status())
	}
	if err := s.Complete(); !errors.Is(err, challenge.ErrSessionAlreadyUsed) {
		t.Fatalf("complete again: %v", err)
	}
	if s.Expire() || s.Status() != challenge.SessionCompleted {
		t.Fatalf("a completed session expired: %s", s.Status())
	}
	p := session(challenge.SessionPending, now)
	if !p.Expire() || p.Status() != challenge.SessionExpired {
		t.Fatalf("expire: %s", p.Status())
	}
	if p.Expire() {
		t.Fatal("an expired session expired twice")
	}
	if err := p.Complete(); !errors.Is(err, challenge.ErrSessionAlreadyUsed) || p.Status() != challenge.SessionExpired {
		t.Fatalf("complete an expired session: %v, %s", err, p.Status())
	}
}

func TestUploadSession_StoredObjectMustBeTheDeclaredFile(t *testing.T) {
	s := session(challenge.SessionPending, now) // a PNG of 8 bytes
	for _, size := range []int64{0, 7, 9} {
		if err := s.CheckStoredSize(size); !errors.Is(err, challenge.ErrImageNotUploaded) {
			t.Errorf("%d bytes stored of 8 declared: %v", size, err)
		}
	}
	if err := s.CheckStoredSize(8); err != nil {
		t.Errorf("the declared size: %v", err)
	}
	if err := s.CheckStoredHead([]byte("\xff\xd8\xff\xe0")); !errors.Is(err, challenge.ErrImageNotUploaded) {
		t.Errorf("a JPEG declared PNG: %v", err)
	}
	if err := s.CheckStoredHead([]byte("\x89PNG\r\n\x1a\n")); err != nil {
		t.Errorf("a PNG: %v", err)
	}
}

func TestVerify_ConsumesAPendingSessionInTime(t *testing.T) {
	c := challenge.RebuildChallenge("c1", "", "t", now.Add(time.Hour), now)
	s := session(challenge.SessionPending, now)
	v, err := challenge.Verify("v1", s, c)
	if err != nil || v.ID() != "v1" || v.UserID() != "u1" || v.ChallengeID() != "c1" || v.UploadSessionID() != "s1" ||
		v.ImageKey() != "k" || v.Status() != challenge.VerificationApproved || !v.RequestedAt().Equal(now) {
		t.Fatalf("verification %+v, %v", v, err)
	}
	for _, tc := range []struct {
		name string
		s    challenge.UploadSession
		want error
	}{
		{"completed session", session(challenge.SessionCompleted, now), challenge.ErrSessionAlreadyUsed},
		{"expired session", session(challenge.SessionExpired, now), challenge.ErrInvalidSession},
		{"requested at the deadline", session(challenge.SessionPending, c.Deadline()), challenge.ErrDeadlinePassed},
	} {
		if _, err := challenge.Verify("v1", tc.s, c); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
