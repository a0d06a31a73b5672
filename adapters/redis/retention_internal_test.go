package redis

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
)

// testRoom is a WaitingRoom under a key prefix of the test's own.
func testRoom(t *testing.T) *WaitingRoom {
	t.Helper()
	client, err := NewClient("redis://"+testenv.RedisAddr(t), Options{
		DialTimeout: testenv.DependencyTimeout, ReadTimeout: testenv.DependencyTimeout, WriteTimeout: testenv.DependencyTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return NewWaitingRoom(client, "rushgate:test:"+uuid.NewString()+":")
}

// ttls answers the TTL of each key of the event's room that exists.
func ttls(t *testing.T, w *WaitingRoom, event string) map[string]time.Duration {
	t.Helper()
	out := make(map[string]time.Duration)
	for _, key := range w.keys(event) {
		ttl, err := w.client.PTTL(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl != -2*time.Nanosecond { // PTTL's -2: no such key (go-redis keeps the sign as ns)
			out[key] = ttl
		}
	}
	return out
}

// An emptied room's keys, every one of them, expire together after the retention; an entry
// takes every TTL off, and a pass that finds the room empty again sets them anew, while a pass
// on a room expiring already leaves its expiry as it is.
func TestWaitingRoom_AnEmptiedRoomsKeysExpireTogetherUntilUsedAgain(t *testing.T) {
	const retention = time.Hour
	ctx := context.Background()
	w := testRoom(t)
	event := uuid.NewString()
	if err := w.Open(ctx, event, 2, 10); err != nil {
		t.Fatal(err)
	}
	// Every key in use: a push user promoted (owners, entry), a pull user admitted with an
	// estimate (tokens, predicted, waits), then both gone.
	if _, err := w.Connect(ctx, event, "pushed", "b|1|"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Promote(ctx, event, time.Minute, ports.EntryRead{Consumer: "d", Count: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Enter(ctx, event, "pulled"); err != nil {
		t.Fatal(err)
	}
	if err := w.Predict(ctx, event, map[string]int{"pulled": 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Enter(ctx, event, "waiting"); err != nil {
		t.Fatal(err)
	}
	if res, err := w.Claim(ctx, event, "pulled", "tok", time.Minute); err != nil || !res.Claimed {
		t.Fatalf("claim = %+v, %v", res, err)
	}
	if err := w.Leave(ctx, event, "waiting"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Release(ctx, event, "pulled"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Disconnect(ctx, event, "pushed", "b|1|"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Reconcile(ctx, event, 0, retention); err != nil {
		t.Fatal(err)
	}
	emptied := ttls(t, w, event)
	// meta, entry and waits outlive their users; the other keys went with their last member.
	if len(emptied) < 3 {
		t.Fatalf("keys left: %v, want at least meta, entry and waits", emptied)
	}
	var first time.Duration
	for key, ttl := range emptied {
		if ttl <= 0 || ttl > retention {
			t.Errorf("%s: TTL %v, want within the retention, %v", key, ttl, retention)
		}
		first = ttl
	}
	if _, err := w.Reconcile(ctx, event, 0, 2*retention); err != nil {
		t.Fatal(err)
	}
	for key, ttl := range ttls(t, w, event) {
		if ttl > first+time.Minute {
			t.Errorf("%s: TTL %v after a second pass, want the first pass's, about %v", key, ttl, first)
		}
	}

	if _, err := w.Enter(ctx, event, "back"); err != nil {
		t.Fatal(err)
	}
	for key, ttl := range ttls(t, w, event) {
		if ttl != -time.Nanosecond { // PTTL's -1: no TTL
			t.Errorf("%s: TTL %v after an entry, want none", key, ttl)
		}
	}
	if err := w.Leave(ctx, event, "back"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Reconcile(ctx, event, 0, retention); err != nil {
		t.Fatal(err)
	}
	for key, ttl := range ttls(t, w, event) {
		if ttl <= 0 || ttl > retention {
			t.Errorf("%s: TTL %v once empty again, want within the retention, %v", key, ttl, retention)
		}
	}
}

// A dispatcher's promotion that creates the entry stream of a room expiring already (it listed
// the event before the pass took it out of the index) gives the stream the room's TTL, so it
// is not left behind when the others expire.
func TestWaitingRoom_AnEntryStreamCreatedInAnExpiringRoomExpiresWithIt(t *testing.T) {
	const retention = time.Hour
	ctx := context.Background()
	w := testRoom(t)
	event := uuid.NewString()
	if err := w.Open(ctx, event, 1, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Reconcile(ctx, event, 0, retention); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Promote(ctx, event, time.Minute, ports.EntryRead{Consumer: "d", Count: 10}); err != nil {
		t.Fatal(err)
	}
	entry := w.keys(event)[6]
	ttl, ok := ttls(t, w, event)[entry]
	if !ok || ttl <= 0 || ttl > retention {
		t.Errorf("entry stream: present %v, TTL %v; want it created with the room's TTL", ok, ttl)
	}
}
