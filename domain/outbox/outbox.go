// Package outbox is the transactional outbox: a message written in the same transaction as the
// change it announces, then delivered to an external system at least once, retried on a
// schedule, and given up on (FAILED, with an alert) once the schedule is spent.
package outbox

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rushgate/rushgate/domain"
)

var (
	ErrNotFound  = domain.NewError(domain.KindNotFound, "OUTBOX_MESSAGE_NOT_FOUND", "outbox message not found")
	ErrNotFailed = domain.NewError(domain.KindConflict, "OUTBOX_MESSAGE_NOT_FAILED", "only a FAILED outbox message can be retried")
)

// MaxErrorLength bounds the stored last error, in bytes.
const MaxErrorLength = 500

// Status is where a message is in its delivery.
type Status string

// Statuses of a message: waiting for (another) send, delivered, given up.
const (
	Pending Status = "PENDING"
	Sent    Status = "SENT"
	Failed  Status = "FAILED"
)

// ParseStatus accepts one of the statuses, else VALIDATION_FAILED naming field.
func ParseStatus(field, s string) (Status, error) {
	switch st := Status(s); st {
	case Pending, Sent, Failed:
		return st, nil
	}
	return "", domain.Invalid(field, "must be PENDING, SENT or FAILED")
}

// Message is one delivery. Payload is the body sent as is; its ID is the stable id the receiver
// de-duplicates by. Attempts counts failed sends; NextAttemptAt is when a PENDING message is
// next due (a claim pushes it to the end of the claim's lease). Origin names the traced span of
// the request that wrote the message (a W3C traceparent), so its delivery can link to it; ""
// when tracing was off. It is never sent.
type Message struct {
	ID            string
	Payload       []byte
	Origin        string
	Status        Status
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	CreatedAt     time.Time
	SentAt        *time.Time
}

// New returns a PENDING message due at once.
func New(id string, payload []byte, now time.Time) Message {
	return Message{ID: id, Payload: payload, Status: Pending, NextAttemptAt: now, CreatedAt: now}
}

// Schedule is the waits before retries 1, 2, …: a message whose send failed once more than the
// schedule has waits is FAILED.
type Schedule []time.Duration

// MarkSent records a successful send at now.
func (m *Message) MarkSent(now time.Time) {
	m.Status, m.SentAt = Sent, &now
}

// MarkFailed records a failed send at now with its error: the message is due again after the
// schedule's next wait, or FAILED when every retry is spent; it reports the latter.
func (m *Message) MarkFailed(cause string, now time.Time, schedule Schedule) (gaveUp bool) {
	m.Attempts++
	m.LastError = storableError(cause)
	if m.Attempts > len(schedule) {
		m.Status = Failed
		return true
	}
	m.NextAttemptAt = now.Add(schedule[m.Attempts-1])
	return false
}

// Retry puts a FAILED message back to PENDING, due at now, with its whole schedule again; any
// other status is ErrNotFailed.
func (m *Message) Retry(now time.Time) error {
	if m.Status != Failed {
		return ErrNotFailed
	}
	m.Status, m.Attempts, m.NextAttemptAt = Pending, 0, now
	return nil
}

// storableError is cause as every database stores it: valid UTF-8 (a platform's reason phrase
// need not be), control characters (Postgres refuses NUL) and invalid bytes replaced by U+FFFD,
// and cut to MaxErrorLength bytes on a character boundary. Postgres and MySQL refuse a cut
// character, and a failure they refuse to record leaves its message PENDING for ever.
func storableError(cause string) string {
	cause = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(cause, string(utf8.RuneError)))
	if len(cause) <= MaxErrorLength {
		return cause
	}
	cut := MaxErrorLength
	for !utf8.RuneStart(cause[cut]) {
		cut--
	}
	return cause[:cut]
}
