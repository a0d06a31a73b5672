package challenge_test

import (
	"errors"
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

func TestUploadSession_CheckUseInSpecOrder(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s := challenge.UploadSession{UserID: "u1", ObjectKey: "k", Status: challenge.SessionPending, RequestedAt: now}
	completed := s
	completed.Status = challenge.SessionCompleted
	expired := s
	expired.Status = challenge.SessionExpired
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
		{s, "u1", "other", now, challenge.ErrInvalidImageKey},
	} {
		if err := tc.s.CheckUse(tc.user, tc.ik, tc.at, 30*time.Minute); !errors.Is(err, tc.want) {
			t.Errorf("%+v by %s: %v, want %v", tc.s, tc.user, err, tc.want)
		}
	}
	c := challenge.Challenge{Deadline: now}
	if c.Accepts(now) || !c.Accepts(now.Add(-time.Microsecond)) {
		t.Error("a session requested at the deadline must be late, one before it in time")
	}
}
