package crew

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/rushgate/rushgate/domain"
)

func TestValidateCrewID(t *testing.T) {
	cases := []struct {
		name, id string
		valid    bool
	}{
		{"canonical", "01936f3e-8a4b-7c2d-9e1f-0a1b2c3d4e5f", true},
		{"upper case", "01936F3E-8A4B-7C2D-9E1F-0A1B2C3D4E5F", false},
		{"empty", "", false},
		{"NUL in place of a digit", "01936f3e-8a4b-7c2d-9e1f-0a1b2c3d4e5\x00", false},
		{"not a UUID", "not-a-uuid", false},
		{"too long", strings.Repeat("a", 37), false},
		{"36 bytes of non-ASCII", strings.Repeat("é", 18), false},
		{"a dash out of place", "01936f3e8-a4b-7c2d-9e1f-0a1b2c3d4e5f", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateCrewID(tc.id)
			if tc.valid != (err == nil) {
				t.Fatalf("%q: valid %v, err %v", tc.id, tc.valid, err)
			}
			if de, ok := domain.AsError(err); err != nil && (!ok || de.Details["field"] != "crewId") {
				t.Fatalf("%q: want VALIDATION_FAILED naming crewId, got %v", tc.id, err)
			}
		})
	}
}

func TestDecodeCursor_RefusesUserIDsNoStoreAccepts(t *testing.T) {
	cases := map[string]string{
		"NUL in the user id":     encode(`{"t":"2026-11-21T09:00:00Z","u":"a\u0000b"}`),
		"newline in the user id": encode(`{"t":"2026-11-21T09:00:00Z","u":"a\nb"}`),
		"empty user id":          encode(`{"t":"2026-11-21T09:00:00Z","u":""}`),
		"user id too long":       encode(`{"t":"2026-11-21T09:00:00Z","u":"` + strings.Repeat("u", domain.MaxUserIDLength+1) + `"}`),
		"not base64":             "%%%",
		"not JSON":               encode("nope"),
	}
	for name, cursor := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := decodeCursor(cursor)
			if de, ok := domain.AsError(err); !ok || !errors.Is(err, domain.ErrValidation) || de.Details["field"] != "cursor" {
				t.Fatalf("want VALIDATION_FAILED naming cursor, got %v", err)
			}
		})
	}
	issued := encode(`{"t":"2026-11-21T09:00:00Z","u":"user-1"}`)
	if c, err := decodeCursor(issued); err != nil || c.UserID != "user-1" {
		t.Fatalf("a well-formed cursor: %+v, %v", c, err)
	}
}

// encode wraps a cursor body the way the server issues cursors.
func encode(json string) string { return base64.RawURLEncoding.EncodeToString([]byte(json)) }
