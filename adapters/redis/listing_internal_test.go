package redis

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/ports"
)

// aroundScript runs before and after each call of one script on the client it is added to.
type aroundScript struct {
	script        *goredis.Script
	before, after func(ctx context.Context)
}

func (h aroundScript) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h aroundScript) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		// The scripts are loaded (WarmUp), so each call is one EVALSHA.
		if args := cmd.Args(); len(args) < 2 || args[0] != "evalsha" || args[1] != h.script.Hash() {
			return next(ctx, cmd)
		}
		if h.before != nil {
			h.before(ctx)
		}
		err := next(ctx, cmd)
		if h.after != nil {
			h.after(ctx)
		}
		return err
	}
}

func (h aroundScript) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// roomOnOwnClient is a waiting room under prefix on a client of its own, its scripts loaded.
func roomOnOwnClient(t *testing.T, prefix string) *WaitingRoom {
	t.Helper()
	w := testRoom(t)
	if err := WarmUp(context.Background(), w.client); err != nil {
		t.Fatal(err)
	}
	return NewWaitingRoom(w.client, prefix)
}

func listed(t *testing.T, w *WaitingRoom, event string) bool {
	t.Helper()
	events, err := w.Events(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(events, event)
}

// Every call that puts a room in use lists its event before it writes the room: when the event
// is listed, the room does not exist yet or still expires, with nobody in it. A Redis that
// loses the last writes (a prefix of them kept) thus never keeps a room in use without its
// listing.
func TestWaitingRoom_ListsTheEventBeforeItWritesTheRoom(t *testing.T) {
	const retention = time.Hour
	ctx := context.Background()
	prefix := "rushgate:test:" + uuid.NewString() + ":"
	w := roomOnOwnClient(t, prefix)
	observer := roomOnOwnClient(t, prefix)
	event := uuid.NewString()
	var listings []string
	w.client.AddHook(aroundScript{script: listScript, before: func(ctx context.Context) {
		meta := w.keys(event)[0]
		ttl, err := observer.client.PTTL(ctx, meta).Result()
		if err != nil {
			t.Error(err)
			return
		}
		switch stats, err := observer.Stats(ctx, event); {
		case ttl == -2*time.Nanosecond: // no such key
			listings = append(listings, "no room")
		case err != nil:
			t.Error(err)
		case ttl > 0 && stats.Waiting+stats.Admitted+stats.Connected == 0:
			listings = append(listings, "an expiring room")
		default:
			listings = append(listings, "a room in use")
		}
	}})
	emptied := func() {
		t.Helper()
		if _, err := w.Reconcile(ctx, event, 0, retention); err != nil {
			t.Fatal(err)
		}
		if listed(t, w, event) {
			t.Fatal("the pass that found the room empty left it listed")
		}
	}
	uses := []struct {
		name, listing string
		use           func() error
	}{
		{"open", "no room", func() error { return w.Open(ctx, event, 1, 10) }},
		{"enter", "an expiring room", func() error { _, err := w.Enter(ctx, event, "u"); return err }},
		{"connect", "an expiring room", func() error { _, err := w.Connect(ctx, event, "p", "b|1|"); return err }},
		{"slot change", "an expiring room", func() error { _, err := w.SetSlots(ctx, event, 2); return err }},
		{"open again", "an expiring room", func() error { return w.Open(ctx, event, 1, 10) }},
	}
	for i, u := range uses {
		if i > 0 {
			if err := w.Leave(ctx, event, "u"); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Disconnect(ctx, event, "p", "b|1|"); err != nil {
				t.Fatal(err)
			}
			emptied()
		}
		listings = nil
		if err := u.use(); err != nil {
			t.Fatalf("%s: %v", u.name, err)
		}
		if want := []string{u.listing}; !slices.Equal(listings, want) {
			t.Errorf("%s: listed the event with %v, want with %v", u.name, listings, want)
		}
		if !listed(t, w, event) {
			t.Errorf("%s: the event is not listed after", u.name)
		}
		if ttl := ttls(t, w, event)[w.keys(event)[0]]; ttl >= 0 {
			t.Errorf("%s: the room still expires in %v", u.name, ttl)
		}
	}
	// A room in use costs its users no listing.
	listings = nil
	if _, err := w.Enter(ctx, event, "v"); err != nil {
		t.Fatal(err)
	}
	if len(listings) != 0 {
		t.Errorf("an entry into a room in use listed it: %v", listings)
	}
}

// A pass that finds a room empty and unlists it, concurrent with an entry that lists the room
// again, leaves it listed in both orders: the pass's unlisting after the entry's listing
// leaves the entry's, and a pass between the entry's listing and its script has the entry list
// the room again.
func TestWaitingRoom_APassUnlistingARoomAsAUserEntersLeavesItListed(t *testing.T) {
	const retention = time.Hour
	ctx := context.Background()
	interleavings := map[string]func(pass, entrant *WaitingRoom, event string){
		"the entry whole between the pass's script and its unlisting": func(pass, entrant *WaitingRoom, event string) {
			var once sync.Once
			pass.client.AddHook(aroundScript{script: unlistScript, before: func(ctx context.Context) {
				once.Do(func() {
					if _, err := entrant.Enter(ctx, event, "u"); err != nil {
						t.Error(err)
					}
				})
			}})
			if _, err := pass.Reconcile(ctx, event, 0, retention); err != nil {
				t.Fatal(err)
			}
		},
		"the pass whole between the entry's listing and its script": func(pass, entrant *WaitingRoom, event string) {
			var once sync.Once
			entrant.client.AddHook(aroundScript{script: listScript, after: func(ctx context.Context) {
				once.Do(func() {
					if _, err := pass.Reconcile(ctx, event, 0, retention); err != nil {
						t.Error(err)
					}
				})
			}})
			if _, err := entrant.Enter(ctx, event, "u"); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, interleave := range interleavings {
		t.Run(name, func(t *testing.T) {
			prefix := "rushgate:test:" + uuid.NewString() + ":"
			pass, entrant := roomOnOwnClient(t, prefix), roomOnOwnClient(t, prefix)
			event := uuid.NewString()
			if err := pass.Open(ctx, event, 1, 10); err != nil {
				t.Fatal(err)
			}
			if _, err := pass.Reconcile(ctx, event, 0, retention); err != nil { // emptied: unlisted
				t.Fatal(err)
			}
			interleave(pass, entrant, event)
			stats, err := pass.Stats(ctx, event)
			if err != nil {
				t.Fatal(err)
			}
			if stats.Waiting != 1 || !listed(t, pass, event) {
				t.Fatalf("after the pass and the entry: %d waiting, listed %v; want the user waiting in a listed room", stats.Waiting, listed(t, pass, event))
			}
			if _, err := pass.Reconcile(ctx, event, 0, retention); err != nil {
				t.Fatal(err)
			}
			if !listed(t, pass, event) {
				t.Fatal("a pass over the room in use unlisted it")
			}
		})
	}
}

// A call that puts an emptied room back in use lists its event at most maxListings times, even
// when a pass finds the room empty again after every listing: five Redis calls at most, then
// ErrUnavailable (the client tries again), so the call stays within five call timeouts.
func TestWaitingRoom_ARoomEmptiedAfterEveryListingAnswersUnavailableAfterTwoListings(t *testing.T) {
	const retention = time.Hour
	ctx := context.Background()
	uses := map[string]func(w *WaitingRoom, event string) error{
		"enter":       func(w *WaitingRoom, event string) error { _, err := w.Enter(ctx, event, "u"); return err },
		"connect":     func(w *WaitingRoom, event string) error { _, err := w.Connect(ctx, event, "u", "b|1|"); return err },
		"slot change": func(w *WaitingRoom, event string) error { _, err := w.SetSlots(ctx, event, 2); return err },
	}
	for name, use := range uses {
		t.Run(name, func(t *testing.T) {
			prefix := "rushgate:test:" + uuid.NewString() + ":"
			pass, caller := roomOnOwnClient(t, prefix), roomOnOwnClient(t, prefix)
			event := uuid.NewString()
			if err := pass.Open(ctx, event, 1, 10); err != nil {
				t.Fatal(err)
			}
			if _, err := pass.Reconcile(ctx, event, 0, retention); err != nil { // emptied: unlisted
				t.Fatal(err)
			}
			listings := 0
			caller.client.AddHook(aroundScript{script: listScript, after: func(ctx context.Context) {
				listings++
				if _, err := pass.Reconcile(ctx, event, 0, retention); err != nil {
					t.Error(err)
				}
			}})
			if err := use(caller, event); !errors.Is(err, ports.ErrUnavailable) {
				t.Fatalf("a room emptied after every listing: %v, want ErrUnavailable", err)
			}
			if listings != 2 {
				t.Fatalf("the call listed the event %d times (maxListings %d), want 2", listings, maxListings)
			}
		})
	}
}
