package outbox_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rushgate/rushgate/domain/outbox"
)

// The last error is stored as every database takes it: Postgres and MySQL refuse a character
// cut in half, invalid UTF-8 and (Postgres) NUL, and a failure they refuse to record would leave
// the message PENDING for ever.
func TestMarkFailed_KeepsALastErrorEveryDatabaseStores(t *testing.T) {
	long := "answered 503 " + strings.Repeat("é", 300) // byte 500 falls inside an é
	cases := []struct {
		name, cause, want string
	}{
		{"short", "answered 503 Service Unavailable", "answered 503 Service Unavailable"},
		{"cut on a character boundary", long, long[:499]},
		{"exactly the limit", strings.Repeat("a", outbox.MaxErrorLength), strings.Repeat("a", outbox.MaxErrorLength)},
		{"invalid UTF-8 and control characters", "answered 503 bad\x00\xff\xfe\treason", "answered 503 bad\uFFFD\uFFFD\uFFFDreason"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := outbox.New("m1", []byte(`{}`), time.Now())

			m.MarkFailed(tc.cause, time.Now(), outbox.Schedule{time.Minute})

			if m.LastError != tc.want || !utf8.ValidString(m.LastError) || len(m.LastError) > outbox.MaxErrorLength {
				t.Fatalf("last error %q (%d bytes), want %q", m.LastError, len(m.LastError), tc.want)
			}
		})
	}
}
