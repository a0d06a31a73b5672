package memory

import "time"

// expiringMap is a map whose entries vanish at their expiry time, like Redis keys with a TTL.
// Expired entries are purged whenever the map has doubled since the last purge, so a
// long-running process does not accumulate them. It is not safe for concurrent use.
type expiringMap[K comparable, V any] struct {
	entries map[K]expiringEntry[V]
	purgeAt int
}

type expiringEntry[V any] struct {
	value     V
	expiresAt time.Time
}

// minPurgeSize keeps small maps from purging on every insert.
const minPurgeSize = 64

func newExpiringMap[K comparable, V any]() *expiringMap[K, V] {
	return &expiringMap[K, V]{entries: make(map[K]expiringEntry[V]), purgeAt: minPurgeSize}
}

// get returns key's value unless it is absent or expired at now.
func (m *expiringMap[K, V]) get(key K, now time.Time) (V, bool) {
	e, ok := m.entries[key]
	if !ok || !now.Before(e.expiresAt) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// set stores value under key until expiresAt.
func (m *expiringMap[K, V]) set(key K, value V, expiresAt, now time.Time) {
	m.entries[key] = expiringEntry[V]{value: value, expiresAt: expiresAt}
	if len(m.entries) >= m.purgeAt {
		for k, e := range m.entries {
			if !now.Before(e.expiresAt) {
				delete(m.entries, k)
			}
		}
		m.purgeAt = max(2*len(m.entries), minPurgeSize)
	}
}

// delete removes key.
func (m *expiringMap[K, V]) delete(key K) { delete(m.entries, key) }
