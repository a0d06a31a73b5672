package domain_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rushgate/rushgate/domain"
)

func TestValidateText(t *testing.T) {
	cases := []struct {
		name, value string
		valid       bool
	}{
		{"plain", "runners", true},
		{"multibyte at the limit", strings.Repeat("é", 10), true},
		{"emoji", "🏃 club", true},
		{"inner space", "a b", true},
		{"surrounding spaces, kept as given", " a ", true},
		{"spaces only", "   ", false},
		{"no-break and ideographic spaces only", "\u00a0\u3000", false},
		{"empty", "", false},
		{"one rune too many", strings.Repeat("é", 11), false},
		{"NUL", "a\x00b", false},
		{"newline", "a\nb", false},
		{"tab", "a\tb", false},
		{"DEL", "a\x7fb", false},
		{"C1 control", "a\u0085b", false},
		{"invalid UTF-8", "a\xffb", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := domain.ValidateText("title", tc.value, 10)
			if tc.valid {
				if err != nil {
					t.Fatalf("refused %q: %v", tc.value, err)
				}
				return
			}
			de, ok := domain.AsError(err)
			if !ok || !errors.Is(err, domain.ErrValidation) || de.Details["field"] != "title" {
				t.Fatalf("%q: want VALIDATION_FAILED naming title, got %v", tc.value, err)
			}
		})
	}
}

func TestValidateUserID(t *testing.T) {
	cases := []struct {
		name, id string
		valid    bool
	}{
		{"plain", "user-42", true},
		{"longest", strings.Repeat("u", domain.MaxUserIDLength), true},
		{"punctuation", "a.b_c:d@e", true},
		{"empty", "", false},
		{"too long", strings.Repeat("u", domain.MaxUserIDLength+1), false},
		{"space", "a b", false},
		{"NUL", "a\x00", false},
		{"DEL", "a\x7f", false},
		{"non-ASCII", "é", false},
		{"invalid UTF-8", "\xff", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := domain.ValidateUserID("userId", tc.id)
			if tc.valid != (err == nil) {
				t.Fatalf("%q: valid %v, err %v", tc.id, tc.valid, err)
			}
			if err != nil && !errors.Is(err, domain.ErrValidation) {
				t.Fatalf("%q: not a validation error: %v", tc.id, err)
			}
		})
	}
}
