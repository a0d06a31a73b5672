package porttest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rushgate/rushgate/ports"
)

// PushRoom is a store implementing both views of the waiting rooms, as the adapters do.
type PushRoom interface {
	ports.WaitingRoom
	ports.PushQueue
}

// pushRetry is how long an unacknowledged message waits before it is read again in the suite.
const pushRetry = 200 * time.Millisecond

// TestPushQueue checks ports.PushQueue: concurrent promotions admit exactly the remaining
// slots' worth of users from the head, each once, into the entry stream in order; entries a
// consumer left unacknowledged are reclaimed by another after the idle time, and the next read
// acknowledges the ones routed; entries carry their users' newest connection owner; Issue
// answers the same token again, for a batch at once; Disconnect applies the disconnect rules only
// for the current owner, or for an older connection of its broker, and forgets it (a late
// departure of a connection another broker replaced changes nothing); dispatch messages go to
// their owners' brokers and are read again until acknowledged (by an Issue or by AckDispatch);
// a dead broker is reaped, giving back its users' slots; a broker's heartbeat says whether its
// last one had lapsed; a connection keeps a room a pass found empty.
func TestPushQueue(t *testing.T, newRoom func(t *testing.T) PushRoom, caps Capabilities) {
	run(t, newRoom, caps, []testCase[PushRoom]{
		{"Promote_ConcurrentPromotersAdmitTheHeadOnce", testPromoteOnce},
		{"Entries_ReclaimedAfterIdle", testEntriesReclaimed},
		{"Entries_CarryTheCurrentOwner", testEntriesOwner},
		{"Issue_SameTokenAgain", testIssueSameToken},
		{"Disconnect_OnlyTheCurrentOwner", testDisconnectOwner},
		{"Disconnect_CoversAnOlderConnectionOfItsBroker", testDisconnectCovers},
		{"Disconnect_LateFromAConnectionAnotherBrokerReplacedChangesNothing", testDisconnectReplacedLate},
		{"Dispatch_ReadAgainUntilAcknowledged", testDispatchRetry},
		{"AckDispatch_AcknowledgesAnyNumberAtOnce", testAckMany},
		{"TellReplaced_ReachesTheReplacedConnectionsBroker", testTellReplaced},
		{"Connect_AnOlderConnectionOfTheSameBrokerComingLateReplacesNothing", testConnectLate},
		{"ReapBroker_GivesBackItsUsersSlots", testReapBroker},
		{"Heartbeat_TellsALapsedBroker", testHeartbeatLapse},
		{"Connect_KeepsAnEmptiedRoom", testConnectKeepsRoom},
	})
}

func connect(t *testing.T, q PushRoom, eventID, userID, owner string) {
	t.Helper()
	_, err := q.Connect(context.Background(), eventID, userID, owner)
	must(t, err, "connect "+userID)
}

func messageIDs(ps []ports.Promotion) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.MessageID
	}
	return out
}

func userIDs(ps []ports.Promotion) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.UserID
	}
	return out
}

func testPromoteOnce(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 3, 10)
	for _, u := range users(5) {
		connect(t, e.impl, eventID, u, "b|"+u+"|")
	}
	var (
		mu    sync.Mutex
		total int
	)
	errs := startTogether(20, func(int) error {
		n, _, err := e.impl.Promote(ctx, eventID, longTokenTTL, ports.EntryRead{})
		mu.Lock()
		total += n
		mu.Unlock()
		return err
	})
	for _, err := range errs {
		must(t, err, "promote")
	}
	if total != 3 {
		t.Fatalf("promoted %d, want the 3 slots", total)
	}
	snap, err := e.impl.Snapshot(ctx, eventID)
	must(t, err, "snapshot")
	if !slices.Equal(snap.Waiting, users(5)[3:]) || snap.RemainingSlots != 0 {
		t.Fatalf("snapshot %+v", snap)
	}
	entries, err := e.impl.ReadEntries(ctx, eventID, ports.EntryRead{Consumer: "c1", Count: 10})
	must(t, err, "read entries")
	if !slices.Equal(userIDs(entries), users(5)[:3]) {
		t.Fatalf("entries %v, want the head in order", userIDs(entries))
	}
	for _, p := range entries {
		if p.Owner != "b|"+p.UserID+"|" || p.EventID != eventID || p.Reclaimed {
			t.Fatalf("entry %+v", p)
		}
	}
	if st := stats(t, e.impl, eventID); st.Admitted != 3 || st.Waiting != 2 || st.Claims != 3 || st.Connected != 5 {
		t.Fatalf("stats %+v", st)
	}
}

func testEntriesReclaimed(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 2, 10)
	for _, u := range users(2) {
		connect(t, e.impl, eventID, u, "b|"+u+"|")
	}
	_, _, err := e.impl.Promote(ctx, eventID, longTokenTTL, ports.EntryRead{})
	must(t, err, "promote")
	dead, err := e.impl.ReadEntries(ctx, eventID, ports.EntryRead{Consumer: "dead", Count: 10, ReclaimIdle: pushRetry})
	must(t, err, "read as the dying consumer")
	if len(dead) != 2 || dead[0].Reclaimed || dead[1].Reclaimed {
		t.Fatalf("dying consumer read %+v, want two first reads", dead)
	}
	// Idle for a minute: nothing the dying consumer read can be that old yet, however slow the
	// machine.
	early, err := e.impl.ReadEntries(ctx, eventID, ports.EntryRead{Consumer: "live", Count: 10, ReclaimIdle: time.Minute})
	must(t, err, "read at once")
	if len(early) != 0 {
		t.Fatalf("reclaimed %d before the idle time", len(early))
	}
	time.Sleep(pushRetry + 100*time.Millisecond)
	live, err := e.impl.ReadEntries(ctx, eventID, ports.EntryRead{Consumer: "live", Count: 10, ReclaimIdle: pushRetry})
	must(t, err, "reclaim")
	if !slices.Equal(userIDs(live), users(2)) || !live[0].Reclaimed || !live[1].Reclaimed {
		t.Fatalf("reclaimed %+v, want both marked reclaimed", live)
	}
	// The next read acknowledges the routed ones.
	after, err := e.impl.ReadEntries(ctx, eventID, ports.EntryRead{Consumer: "live", Routed: messageIDs(live), Count: 10, ReclaimIdle: pushRetry})
	must(t, err, "acknowledge by reading")
	if len(after) != 0 {
		t.Fatalf("read %+v after routing everything", after)
	}
	time.Sleep(pushRetry + 100*time.Millisecond)
	left, err := e.impl.ReadEntries(ctx, eventID, ports.EntryRead{Consumer: "other", Count: 10, ReclaimIdle: pushRetry})
	must(t, err, "read after ack")
	if len(left) != 0 {
		t.Fatalf("%d entries left after acknowledging", len(left))
	}
}

func testIssueSameToken(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 10)
	connect(t, e.impl, eventID, "u1", "b|1|")
	connect(t, e.impl, eventID, "u2", "b|2|")
	_, _, err := e.impl.Promote(ctx, eventID, longTokenTTL, ports.EntryRead{})
	must(t, err, "promote")
	if ok, _, err := e.impl.Verify(ctx, eventID, "u1", ""); err != nil || ok {
		t.Fatalf("a promoted user without a token verifies an empty one: %v %v", ok, err)
	}
	issue := func(what string, grants ...ports.TokenGrant) []ports.ClaimResult {
		t.Helper()
		res, err := e.impl.Issue(ctx, eventID, grants, longTokenTTL, ports.DispatchAck{})
		must(t, err, what)
		if len(res) != len(grants) {
			t.Fatalf("%s: %d results for %d grants", what, len(res), len(grants))
		}
		return res
	}
	// One call: the admitted u1 gets tok-a, the waiting u2 nothing.
	first := issue("issue", ports.TokenGrant{UserID: "u1", Token: "tok-a"}, ports.TokenGrant{UserID: "u2", Token: "tok-c"})
	again := issue("issue again", ports.TokenGrant{UserID: "u1", Token: "tok-b"})
	if !first[0].Claimed || !first[0].Created || first[0].Token != "tok-a" || !again[0].Claimed || again[0].Created || again[0].Token != "tok-a" {
		t.Fatalf("issue %+v, again %+v", first, again)
	}
	if ok, _, err := e.impl.Verify(ctx, eventID, "u1", "tok-a"); err != nil || !ok {
		t.Fatalf("issued token does not verify: %v %v", ok, err)
	}
	if first[1].Claimed {
		t.Fatalf("a waiting user got a token: %+v", first[1])
	}
	if ok, _, _ := e.impl.Verify(ctx, eventID, "u2", "tok-c"); ok {
		t.Fatal("a waiting user's token verifies")
	}
}

// testEntriesOwner: an entry carries the newest connection owner of its user at the read, none
// once the user departed.
func testEntriesOwner(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 2, 10)
	connect(t, e.impl, eventID, "stays", "b|1|")
	connect(t, e.impl, eventID, "stays", "b|2|") // reconnect: the newer connection owns the user
	connect(t, e.impl, eventID, "leaves", "b|3|")
	_, _, err := e.impl.Promote(ctx, eventID, longTokenTTL, ports.EntryRead{})
	must(t, err, "promote")
	if d, err := e.impl.Disconnect(ctx, eventID, "leaves", "b|3|"); err != nil || d != ports.Released {
		t.Fatalf("admitted user's disconnect: %v %v", d, err)
	}
	entries, err := e.impl.ReadEntries(ctx, eventID, ports.EntryRead{Consumer: "c1", Count: 10})
	must(t, err, "read entries")
	if len(entries) != 2 || entries[0].UserID != "stays" || entries[0].Owner != "b|2|" || entries[1].UserID != "leaves" || entries[1].Owner != "" {
		t.Fatalf("entries %+v, want the newer owner and none for the departed", entries)
	}
}

func testDisconnectOwner(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 10)
	connect(t, e.impl, eventID, "admitted", "b|1|")
	_, _, err := e.impl.Promote(ctx, eventID, longTokenTTL, ports.EntryRead{})
	must(t, err, "promote")
	_, err = e.impl.Issue(ctx, eventID, []ports.TokenGrant{{UserID: "admitted", Token: "tok"}}, longTokenTTL, ports.DispatchAck{})
	must(t, err, "issue")
	connect(t, e.impl, eventID, "waiter", "b|2|")
	connect(t, e.impl, eventID, "waiter", "b|3|") // reconnect: the newer connection owns the user
	if d, err := e.impl.Disconnect(ctx, eventID, "waiter", "b|2|"); err != nil || d != ports.Stayed {
		t.Fatalf("stale owner's disconnect: %v %v", d, err)
	}
	if d, err := e.impl.Disconnect(ctx, eventID, "waiter", "b|3|"); err != nil || d != ports.Removed {
		t.Fatalf("waiting user's disconnect: %v %v", d, err)
	}
	if d, err := e.impl.Disconnect(ctx, eventID, "waiter", "b|3|"); err != nil || d != ports.Stayed {
		t.Fatalf("a second disconnect: %v %v", d, err)
	}
	if d, err := e.impl.Disconnect(ctx, eventID, "admitted", "b|1|"); err != nil || d != ports.Released {
		t.Fatalf("admitted user's disconnect: %v %v", d, err)
	}
	if ok, _, _ := e.impl.Verify(ctx, eventID, "admitted", "tok"); ok {
		t.Fatal("a departed user's token still verifies")
	}
	if st := stats(t, e.impl, eventID); st.Waiting != 0 || st.Admitted != 0 || st.RemainingSlots != 1 || st.Connected != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// testDisconnectCovers: a connection's departure applies the rules to a user still held by an
// older connection of its broker (one it replaced there before its own Connect reached the
// store), and to nobody held by another broker's or a newer connection.
func testDisconnectCovers(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 10)
	connect(t, e.impl, eventID, "admitted", "b|5|")
	_, _, err := e.impl.Promote(ctx, eventID, longTokenTTL, ports.EntryRead{})
	must(t, err, "promote")
	connect(t, e.impl, eventID, "waiter", "b|5|")
	for _, owner := range []string{"b|4|", "c|9|", "b.1|9|", "bb|9|", "|9|"} {
		if d, err := e.impl.Disconnect(ctx, eventID, "waiter", owner); err != nil || d != ports.Stayed {
			t.Fatalf("disconnect of %s, which does not cover b|5|: %v %v", owner, d, err)
		}
	}
	if d, err := e.impl.Disconnect(ctx, eventID, "waiter", "b|12|"); err != nil || d != ports.Removed {
		t.Fatalf("a newer connection's disconnect of a waiting user held by an older one: %v %v", d, err)
	}
	if d, err := e.impl.Disconnect(ctx, eventID, "admitted", "b|6|"); err != nil || d != ports.Released {
		t.Fatalf("a newer connection's disconnect of an admitted user held by an older one: %v %v", d, err)
	}
	if st := stats(t, e.impl, eventID); st.Waiting != 0 || st.Admitted != 0 || st.RemainingSlots != 1 || st.Connected != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// testDisconnectReplacedLate: a user's connection on one broker that departs after the user's
// newer connection on another broker connected (its client left, or it was told it was
// replaced) owns nothing: the user keeps the place, then the admission, whose entry goes to the
// newer connection's broker.
func testDisconnectReplacedLate(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 10)
	older, newer := "older-"+randomID(), "newer-"+randomID()
	connect(t, e.impl, eventID, "ahead", older+"|1|")
	connect(t, e.impl, eventID, "u", older+"|2|")
	place, err := e.impl.Connect(ctx, eventID, "u", newer+"|1|")
	must(t, err, "connect on the newer broker")
	if place.Replaced != older+"|2|" || place.Rank != 1 {
		t.Fatalf("newer connection: %+v, want rank 1 and the older connection replaced", place)
	}
	departLate := func(what string) {
		t.Helper()
		if d, err := e.impl.Disconnect(ctx, eventID, "u", older+"|2|"); err != nil || d != ports.Stayed {
			t.Fatalf("the replaced connection's departure, %s: %v %v, want it to change nothing", what, d, err)
		}
	}
	departLate("while the user waits")
	snap, err := e.impl.Snapshot(ctx, eventID)
	must(t, err, "snapshot")
	if !slices.Equal(snap.Waiting, []string{"ahead", "u"}) {
		t.Fatalf("line %v, want u still behind ahead", snap.Waiting)
	}
	if d, err := e.impl.Disconnect(ctx, eventID, "ahead", older+"|1|"); err != nil || d != ports.Removed {
		t.Fatalf("ahead's departure: %v %v", d, err)
	}
	_, entries, err := e.impl.Promote(ctx, eventID, longTokenTTL, ports.EntryRead{Consumer: "c1", Count: 10})
	must(t, err, "promote")
	if len(entries) != 1 || entries[0].UserID != "u" || entries[0].Owner != newer+"|1|" {
		t.Fatalf("entries %+v, want u's, owned by the newer connection", entries)
	}
	_, err = e.impl.Issue(ctx, eventID, []ports.TokenGrant{{UserID: "u", Token: "tok"}}, longTokenTTL, ports.DispatchAck{})
	must(t, err, "issue")
	departLate("once the user is admitted")
	if ok, _, err := e.impl.Verify(ctx, eventID, "u", "tok"); err != nil || !ok {
		t.Fatalf("u's token after the replaced connection's departure: %v %v, want it valid", ok, err)
	}
	if st := stats(t, e.impl, eventID); st.Admitted != 1 || st.RemainingSlots != 0 || st.Connected != 1 {
		t.Fatalf("stats %+v, want u admitted, its slot taken and its connection held", st)
	}
	must(t, e.impl.Dispatch(ctx, entries), "dispatch")
	for broker, want := range map[string]int{newer: 1, older: 0} {
		if got, err := e.impl.ReadDispatch(ctx, broker, 10, 0, 0); err != nil || len(got) != want {
			t.Fatalf("broker %s read %+v, %v; want %d admissions", broker, got, err, want)
		}
	}
}

func testDispatchRetry(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	broker, other := "broker-"+randomID(), "other-"+randomID()
	at := time.Now().Truncate(time.Millisecond)
	must(t, e.impl.Dispatch(ctx, []ports.Promotion{
		{MessageID: "entry-1", EventID: "e1", UserID: "u1", Owner: broker + "|1|", PromotedAt: at},
		{MessageID: "entry-2", EventID: "e1", UserID: "gone", PromotedAt: at},
		{MessageID: "entry-3", EventID: "e2", UserID: "u3", Owner: other + "|7|", PromotedAt: at},
	}), "dispatch")
	got, err := e.impl.ReadDispatch(ctx, broker, 10, time.Second, pushRetry)
	must(t, err, "read")
	if len(got) != 1 || got[0].EventID != "e1" || got[0].UserID != "u1" || !got[0].PromotedAt.Equal(at) || got[0].Reclaimed || got[0].Owner != "" {
		t.Fatalf("read %+v, want u1 alone", got)
	}
	// Without retries, the read is a blocking read alone: the other broker's first read too.
	elsewhere, err := e.impl.ReadDispatch(ctx, other, 10, time.Second, 0)
	must(t, err, "read the other broker's")
	if len(elsewhere) != 1 || elsewhere[0].EventID != "e2" || elsewhere[0].UserID != "u3" {
		t.Fatalf("other broker read %+v, want u3", elsewhere)
	}
	time.Sleep(pushRetry + 100*time.Millisecond)
	again, err := e.impl.ReadDispatch(ctx, broker, 10, 0, pushRetry)
	must(t, err, "read again")
	if len(again) != 1 || again[0].MessageID != got[0].MessageID || !again[0].Reclaimed {
		t.Fatalf("unacknowledged message not read again: %+v", again)
	}
	// Issue acknowledges the messages delivered before it; AckDispatch does on its own.
	eventID := openRoom(t, e.impl, 1, 10)
	_, err = e.impl.Issue(ctx, eventID, []ports.TokenGrant{{UserID: "u1", Token: "tok"}}, longTokenTTL,
		ports.DispatchAck{BrokerID: broker, MessageIDs: messageIDs(got)})
	must(t, err, "issue and acknowledge")
	must(t, e.impl.AckDispatch(ctx, other, messageIDs(elsewhere)), "ack")
	time.Sleep(pushRetry + 100*time.Millisecond)
	for _, b := range []string{broker, other} {
		if left, err := e.impl.ReadDispatch(ctx, b, 10, 0, pushRetry); err != nil || len(left) != 0 {
			t.Fatalf("after acknowledging %s: %+v %v", b, left, err)
		}
	}
}

// A broker whose acknowledgements kept failing while its reads succeeded has many to send at
// once (on Redis, more than a Lua script can unpack in one call).
func testAckMany(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	broker := "broker-" + randomID()
	const many = 9000
	promotions := make([]ports.Promotion, many)
	for i := range promotions {
		promotions[i] = ports.Promotion{EventID: "e1", UserID: fmt.Sprint("u", i), Owner: broker + "|1|", PromotedAt: time.Now()}
	}
	must(t, e.impl.Dispatch(ctx, promotions), "dispatch")
	read, err := e.impl.ReadDispatch(ctx, broker, many, time.Second, 0)
	must(t, err, "read")
	if len(read) != many {
		t.Fatalf("read %d messages, want %d", len(read), many)
	}
	must(t, e.impl.AckDispatch(ctx, broker, messageIDs(read)), "acknowledge them all at once")
	time.Sleep(pushRetry + 100*time.Millisecond)
	if left, err := e.impl.ReadDispatch(ctx, broker, many, 0, pushRetry); err != nil || len(left) != 0 {
		t.Fatalf("after acknowledging: %d messages read again, %v", len(left), err)
	}
}

func testTellReplaced(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 10)
	first, second, never := "first-"+randomID(), "second-"+randomID(), "never-"+randomID()
	for _, b := range []string{first, second} { // live brokers have read their streams
		_, err := e.impl.ReadDispatch(ctx, b, 10, 0, 0)
		must(t, err, "first read of "+b)
	}
	for i, c := range []struct{ owner, replaced string }{
		{first + "|1|", ""},              // a first connection replaces nothing
		{first + "|1|", ""},              // nor does the same one again
		{second + "|2|", first + "|1|"},  // another broker's replaces the first
		{second + "|3|", second + "|2|"}, // a newer one on the same broker too
	} {
		place, err := e.impl.Connect(ctx, eventID, "u", c.owner)
		must(t, err, "connect")
		if place.Replaced != c.replaced {
			t.Fatalf("connection %d: replaced %q, want %q", i, place.Replaced, c.replaced)
		}
	}
	must(t, e.impl.TellReplaced(ctx, eventID, "u", first+"|1|"), "tell the first broker")
	must(t, e.impl.TellReplaced(ctx, eventID, "u", never+"|4|"), "tell a broker that never read")
	got, err := e.impl.ReadDispatch(ctx, first, 10, time.Second, 0)
	must(t, err, "read the first broker's")
	if len(got) != 1 || !got[0].Replaced || got[0].Owner != first+"|1|" || got[0].EventID != eventID || got[0].UserID != "u" {
		t.Fatalf("first broker read %+v, want that its connection of u was replaced", got)
	}
	must(t, e.impl.AckDispatch(ctx, first, messageIDs(got)), "ack")
	for _, b := range []string{second, never} {
		if read, err := e.impl.ReadDispatch(ctx, b, 10, 0, 0); err != nil || len(read) != 0 {
			t.Fatalf("broker %s read %+v, %v; want nothing", b, read, err)
		}
	}
}

// Two joins of one user on one broker whose Connects run in the other order than the broker
// numbered them: the newer connection keeps the user, whatever another broker's numbers.
func testConnectLate(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 10)
	connect(t, e.impl, eventID, "u", "b|10|")
	place, err := e.impl.Connect(ctx, eventID, "u", "b|9|")
	must(t, err, "connect late")
	if place.Replaced != "" {
		t.Fatalf("the late older connection replaced %q", place.Replaced)
	}
	if d, err := e.impl.Disconnect(ctx, eventID, "u", "b|9|"); err != nil || d != ports.Stayed {
		t.Fatalf("the late older connection's disconnect: %v %v, want it to own nothing", d, err)
	}
	place, err = e.impl.Connect(ctx, eventID, "u", "c|1|") // another broker's number says nothing
	must(t, err, "connect on another broker")
	if place.Replaced != "b|10|" {
		t.Fatalf("another broker's connection replaced %q, want b|10|", place.Replaced)
	}
	if d, err := e.impl.Disconnect(ctx, eventID, "u", "c|1|"); err != nil || d != ports.Removed {
		t.Fatalf("the newest connection's disconnect: %v %v", d, err)
	}
}

func testReapBroker(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	dead, live := "dead-"+randomID(), "live-"+randomID()
	eventID := openRoom(t, e.impl, 2, 10)
	connect(t, e.impl, eventID, "d1", dead+"|1|")
	connect(t, e.impl, eventID, "l1", live+"|1|")
	connect(t, e.impl, eventID, "d2", dead+"|2|")
	_, _, err := e.impl.Promote(ctx, eventID, longTokenTTL, ports.EntryRead{}) // d1 and l1 admitted; d2 waits
	must(t, err, "promote")
	must(t, e.impl.Dispatch(ctx, []ports.Promotion{{EventID: eventID, UserID: "d1", Owner: dead + "|1|"}}), "dispatch")
	_, err = e.impl.Heartbeat(ctx, dead, pushRetry)
	must(t, err, "heartbeat dead")
	_, err = e.impl.Heartbeat(ctx, live, time.Minute)
	must(t, err, "heartbeat live")
	time.Sleep(pushRetry + 100*time.Millisecond)
	brokers, err := e.impl.DeadBrokers(ctx)
	must(t, err, "dead brokers")
	if !slices.Contains(brokers, dead) || slices.Contains(brokers, live) {
		t.Fatalf("dead brokers %v", brokers)
	}
	freed, err := e.impl.ReapBroker(ctx, dead, []string{eventID})
	must(t, err, "reap")
	if freed != 1 {
		t.Fatalf("reaping freed %d slots, want d1's", freed)
	}
	if st := stats(t, e.impl, eventID); st.Admitted != 1 || st.Waiting != 0 || st.Connected != 1 || st.RemainingSlots != 1 {
		t.Fatalf("after reaping: %+v", st)
	}
	brokers, err = e.impl.DeadBrokers(ctx)
	must(t, err, "dead brokers after reaping")
	if slices.Contains(brokers, dead) {
		t.Fatal("a reaped broker is still listed")
	}
}

func testHeartbeatLapse(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	broker := "lapsing-" + randomID()
	beat := func(what string, ttl time.Duration) bool {
		t.Helper()
		renewed, err := e.impl.Heartbeat(ctx, broker, ttl)
		must(t, err, what)
		return renewed
	}
	if beat("first heartbeat", time.Minute) {
		t.Fatal("a broker's first heartbeat renewed something")
	}
	if !beat("heartbeat within the ttl", pushRetry) {
		t.Fatal("a heartbeat within the ttl was not a renewal")
	}
	time.Sleep(pushRetry + 100*time.Millisecond)
	if beat("heartbeat after the ttl", time.Minute) {
		t.Fatal("a heartbeat after the ttl lapsed was taken for a renewal")
	}
	if !beat("heartbeat after the lapse", time.Minute) {
		t.Fatal("the heartbeat after a lapse did not start a new lease")
	}
}

func testConnectKeepsRoom(t *testing.T, e env[PushRoom]) {
	ctx := context.Background()
	eventID := openRoom(t, e.impl, 1, 5)
	_, err := e.impl.Reconcile(ctx, eventID, 0, longRetention)
	must(t, err, "reconcile the empty room")
	connect(t, e.impl, eventID, "a", "b|1|")
	departed, err := e.impl.Disconnect(ctx, eventID, "a", "b|1|")
	must(t, err, "disconnect")
	expectEqual(t, departed, ports.Removed, "a's departure")
	emptyAgainForgotten(t, e.impl, eventID)
}
