package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain"
)

func TestValidateInstant(t *testing.T) {
	cases := []struct {
		value string
		valid bool
	}{
		{"2030-01-02T15:04:05Z", true},
		{"1000-01-01T00:00:00Z", true},
		{"9999-12-31T23:59:59.999999Z", true},
		{"1000-01-01T00:00:00+01:00", false},    // 999-12-31 in UTC
		{"9999-12-31T23:59:59-23:59", false},    // year 10000 in UTC
		{"9999-12-31T23:59:59.9999995Z", false}, // rounds to the year 10000 at microseconds
		{"0001-01-01T00:00:00Z", false},
	}
	for _, tc := range cases {
		t.Run(tc.value, func(t *testing.T) {
			at, err := time.Parse(time.RFC3339Nano, tc.value)
			if err != nil {
				t.Fatal(err)
			}
			err = domain.ValidateInstant("deadline", at)
			if tc.valid {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			de, ok := domain.AsError(err)
			if !ok || !errors.Is(err, domain.ErrValidation) || de.Details["field"] != "deadline" {
				t.Fatalf("want VALIDATION_FAILED naming deadline, got %v", err)
			}
		})
	}
}

func TestParseInstant_TakesRFC3339Only(t *testing.T) {
	for value, valid := range map[string]bool{
		"2030-01-02T15:04:05Z":          true,
		"2030-01-02T15:04:05.123+09:00": true,
		"2030-01-02T15:04:05,123Z":      false, // Go's parser takes the comma, RFC 3339 does not
		"2030-01-02t15:04:05z":          true,  // RFC 3339 §5.6 allows both in lower case, Go's parser does not
		"2030-01-02t15:04:05.5+09:00":   true,
		"2030-01-02 15:04:05Z":          false,
		"2030-01-02":                    false,
		"":                              false,
	} {
		_, err := domain.ParseInstant("opensAt", value)
		if de, _ := domain.AsError(err); valid != (err == nil) || !valid && de.Details["field"] != "opensAt" {
			t.Errorf("%q: %v", value, err)
		}
	}
}
