// Package draw is the commitment behind every verifiable draw: a secret 32-byte seed chosen up
// front, its SHA-256 published at once, the seed itself published after the draw, and an order
// of users anyone holding the seed can recompute. It imports the standard library only.
package draw

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"slices"
)

// SeedSize is the seed's length in bytes.
const SeedSize = 32

// Seed is a draw's secret. It must stay unpublished until the draw has run, so every way of
// printing it (fmt verbs, slog, JSON) shows a placeholder: only Hex publishes it.
type Seed [SeedSize]byte

const hidden = "[seed hidden]"

// NewSeed draws a fresh seed from random.
func NewSeed(random io.Reader) (Seed, error) {
	var s Seed
	if _, err := io.ReadFull(random, s[:]); err != nil {
		return Seed{}, fmt.Errorf("draw: new seed: %w", err)
	}
	return s, nil
}

// RandomSeed draws a fresh seed from the operating system's generator.
func RandomSeed() (Seed, error) { return NewSeed(rand.Reader) }

// SeedFromBytes restores a stored seed; b must hold exactly SeedSize bytes.
func SeedFromBytes(b []byte) (Seed, error) {
	var s Seed
	if len(b) != SeedSize {
		return Seed{}, fmt.Errorf("draw: a seed is %d bytes, not %d", SeedSize, len(b))
	}
	copy(s[:], b)
	return s, nil
}

// ParseSeed reads a published seed (hex).
func ParseSeed(published string) (Seed, error) {
	b, err := hex.DecodeString(published)
	if err != nil {
		return Seed{}, fmt.Errorf("draw: seed is not hex: %w", err)
	}
	return SeedFromBytes(b)
}

// Bytes is the raw seed, for storage only.
func (s Seed) Bytes() []byte { return bytes.Clone(s[:]) }

// Hex publishes the seed, lower-case hex: call it only once the draw has run.
func (s Seed) Hex() string { return hex.EncodeToString(s[:]) }

// Hash is the commitment published before the draw: hex(SHA-256(seed)).
func (s Seed) Hash() string {
	sum := sha256.Sum256(s[:])
	return hex.EncodeToString(sum[:])
}

// Ticket is userID's ticket: hex(SHA-256(seed ‖ ":" ‖ userID)).
func (s Seed) Ticket(userID string) string {
	sum := s.ticket(make([]byte, 0, SeedSize+1+len(userID)), userID)
	return hex.EncodeToString(sum[:])
}

// ticket is userID's ticket as bytes, hashed in buf (reused across calls).
func (s Seed) ticket(buf []byte, userID string) [sha256.Size]byte {
	buf = append(append(append(buf[:0], s[:]...), ':'), userID...)
	return sha256.Sum256(buf)
}

// String, Format, LogValue and MarshalText keep the seed out of logs, errors and answers.
func (Seed) String() string                 { return hidden }
func (Seed) Format(f fmt.State, _ rune)     { _, _ = io.WriteString(f, hidden) }
func (Seed) LogValue() slog.Value           { return slog.StringValue(hidden) }
func (Seed) MarshalText() ([]byte, error)   { return []byte(hidden), nil }
func (s Seed) Matches(seedHash string) bool { return s.Hash() == seedHash }

// Entrant is a user with their ticket.
type Entrant struct {
	UserID string
	Ticket string
}

// Order returns the users in draw order, with their tickets: tickets ascending, ties
// (impossible in practice) by user id.
func Order(seed Seed, userIDs []string) []Entrant {
	drawn := ranked(seed, userIDs)
	entrants := make([]Entrant, len(drawn))
	for i, d := range drawn {
		entrants[i] = Entrant{UserID: d.userID, Ticket: hex.EncodeToString(d.ticket[:])}
	}
	return entrants
}

// OrderUsers returns the users in draw order, as Order does, without their tickets.
func OrderUsers(seed Seed, userIDs []string) []string {
	drawn := ranked(seed, userIDs)
	users := make([]string, len(drawn))
	for i, d := range drawn {
		users[i] = d.userID
	}
	return users
}

// drawn is a user with their raw ticket; head is the ticket's first 8 bytes, big-endian, which
// decide nearly every comparison in one step.
type drawn struct {
	head   uint64
	ticket [sha256.Size]byte
	userID string
}

// ranked hashes each user once, then sorts by the raw ticket: bytes ascending is hex ascending.
func ranked(seed Seed, userIDs []string) []drawn {
	all := make([]drawn, len(userIDs))
	buf := make([]byte, 0, 128)
	for i, id := range userIDs {
		t := seed.ticket(buf, id)
		all[i] = drawn{head: binary.BigEndian.Uint64(t[:8]), ticket: t, userID: id}
	}
	slices.SortFunc(all, func(a, b drawn) int {
		if a.head != b.head {
			return cmp.Compare(a.head, b.head)
		}
		return cmp.Or(bytes.Compare(a.ticket[:], b.ticket[:]), cmp.Compare(a.userID, b.userID))
	})
	return all
}
