package waiting

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/ports"
)

// Defaults of BrokerConfig's and DispatcherConfig's zero fields.
const (
	DefaultTick             = time.Second
	DefaultHeartbeatTimeout = 10 * time.Second
	DefaultPromotionWorkers = 4
	DefaultPromotionBacklog = 64
	// routeBatch bounds one read of an entry or dispatch stream.
	routeBatch = 256
	// routeParallelism is how many messages of a batch are routed or delivered at once: each
	// takes a few round trips to the queue, which one after another would make the last of a
	// 1,000-user promotion wait for thousands of them.
	routeParallelism = 8
)

// BrokerConfig tunes a Broker.
type BrokerConfig struct {
	// Tick is the position broadcast period, and how long a read of the dispatch stream waits.
	Tick time.Duration
	// ReconnectGrace is how long a disconnected user keeps the place or the admission; 0 applies
	// the disconnect rules (Disconnect) at once.
	ReconnectGrace time.Duration
	// HeartbeatTimeout is the lease of the broker's heartbeat: a broker silent this long is
	// dead, and a dispatcher reaps it (its users' slots come back and its messages are
	// reclaimed). A broker that finds its own heartbeat lapsed ends its streams (see Broker).
	HeartbeatTimeout time.Duration
	// Timeout, the database's timeout, bounds a join's database work in all: the event's read
	// (its first join here) and, when the store lost the room, the reads that open it again. It
	// bounds a tick's broadcast of each event the same way, and a delivery's read of the event.
	// Zero: each read has its own timeout.
	Timeout time.Duration
}

func (c BrokerConfig) withDefaults() BrokerConfig {
	if c.Tick <= 0 {
		c.Tick = DefaultTick
	}
	if c.HeartbeatTimeout <= 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	return c
}

// DispatcherConfig tunes a Dispatcher.
type DispatcherConfig struct {
	// Tick is the promotion period.
	Tick time.Duration
	// HeartbeatTimeout is the brokers' (BrokerConfig.HeartbeatTimeout). Entry messages a
	// dispatcher read and left unacknowledged this long are reclaimed by another; a dispatcher
	// that did not tick for this long logs it.
	HeartbeatTimeout time.Duration
	// PromotionWorkers promote events in parallel; PromotionBacklog events may wait for them,
	// beyond which the dispatcher's own tick promotes (back-pressure).
	PromotionWorkers int
	PromotionBacklog int
	// Timeout, the database's timeout, bounds the database work of an event's promotion in
	// all: the event's read (its first tick here) and, when the store lost the room, the reads
	// that open it again. Zero: each read has its own timeout.
	Timeout time.Duration
}

func (c DispatcherConfig) withDefaults() DispatcherConfig {
	if c.Tick <= 0 {
		c.Tick = DefaultTick
	}
	if c.HeartbeatTimeout <= 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.PromotionWorkers <= 0 {
		c.PromotionWorkers = DefaultPromotionWorkers
	}
	if c.PromotionBacklog <= 0 {
		c.PromotionBacklog = DefaultPromotionBacklog
	}
	return c
}

// PushObserver receives the push mode's numbers, for metrics: a broker's and a dispatcher's.
type PushObserver interface {
	BrokerObserver
	DispatcherObserver
}

// BrokerObserver receives a broker's numbers, for metrics. It must be cheap and safe for
// concurrent use.
type BrokerObserver interface {
	// Connections is this broker's SSE connections to an event.
	Connections(eventID string, n int)
	// Broadcast: one tick's positions of an event reached every local connection after took.
	Broadcast(eventID string, took time.Duration)
	// Delivered: an entry token was handed to a connection.
	Delivered(eventID string)
	// BrokerLapsed: this broker found its heartbeat had lapsed and ended that many streams.
	BrokerLapsed(streams int)
	// BrokerBeat: a broker's heartbeat reached the store.
	BrokerBeat()
}

// DispatcherObserver receives a dispatcher's numbers, for metrics. It must be cheap and safe
// for concurrent use.
type DispatcherObserver interface {
	// Promoted: one promotion script of an event ran for took and promoted n users.
	Promoted(eventID string, n int, took time.Duration)
	// PromotionBacklog is how many events wait for a promotion worker.
	PromotionBacklog(n int)
	// BrokerReaped: a dispatcher reaped a dead broker, giving slots back.
	BrokerReaped(slots int)
	// EntriesReclaimed: a dispatcher routes n entries of an event left unacknowledged past the
	// heartbeat timeout: by another dispatcher that stalled or died, or by a stalled or failed
	// pass of its own.
	EntriesReclaimed(eventID string, n int)
	// DispatcherStalled: a dispatcher ticked again after a gap longer than the heartbeat timeout.
	DispatcherStalled(gap time.Duration)
	// DispatcherTicked: a dispatcher's tick went through every event without an error.
	DispatcherTicked()
}

// PositionView is a push `position` event; AheadCount and EstimatedWaitSeconds
// follow StatusView's rules.
type PositionView struct {
	Rank                 int
	AheadCount           int
	QueueSize            int
	EstimatedWaitSeconds *int
}

// Position is a position event and the tick it belongs to.
type Position struct {
	PositionView
	Tick time.Time
}

// Admission is an admitted event and when its promotion ran (zero for an admission sent again
// on a reconnect).
type Admission struct {
	TokenView
	PromotedAt time.Time
}

// Stream is where the broker sends one connection's events: the driving adapter's side of a
// Subscription. The broker calls it from several goroutines at once, and End with its own lock
// held, so its methods must be safe for concurrent use and may neither block nor call back into
// the broker; a newer position replaces one not yet sent. A stream that ended ignores what it
// is sent.
type Stream interface {
	// Position is the user's place at a tick, while waiting.
	Position(Position)
	// Admitted is the entry token once admitted (again after a reconnect). A connection's user
	// admitted never waits again on it, so the stream drops the positions sent after: the broker
	// sends those of a snapshot taken before the promotion when the admission overtakes them.
	Admitted(Admission)
	// Prequeue: the user waits in the pre-queue, without a rank, until the sale opens;
	// sent on joining and every tick until then. A user placed in line never goes back to the
	// pre-queue, so the stream drops the pre-queues sent after a position or the admission: the
	// broker sends a tick's from a snapshot taken before the opening when the admission overtakes
	// it.
	Prequeue(PrequeueView)
	// SoldOut: the event sold out. The adapter tells the client, then ends the connection as
	// End does.
	SoldOut()
	// Replaced: the same user connected again (another tab or window, here or through another
	// instance), and the newer connection holds the place now. The adapter tells the client,
	// so that it does not reconnect by itself and take the place back, then ends the connection
	// as End does.
	Replaced()
	// End: the broker ended the connection (shutdown, or the broker's heartbeat lapsed). The
	// adapter closes the connection and then calls Broker.Leave as for any other end.
	End()
}

// Subscription is one SSE connection of a user to an event's queue.
type Subscription struct {
	EventID string
	UserID  string
	owner   string

	stream    Stream
	closeOnce sync.Once
	// predicted: the store has this connection's first wait estimate (set under the broker's
	// lock); a reconnect's new one may send it again, and the store keeps the first.
	predicted bool
}

func (s *Subscription) end() { s.closeOnce.Do(s.stream.End) }

// soldOut tells the stream the event sold out, which ends it; instead of end, not after.
func (s *Subscription) soldOut() { s.closeOnce.Do(s.stream.SoldOut) }

// replaced tells the stream a newer connection of its user took over, which ends it; instead
// of end, not after.
func (s *Subscription) replaced() { s.closeOnce.Do(s.stream.Replaced) }

// Broker holds this instance's SSE connections: it enters their users, sends
// their positions every tick from one snapshot per event, reads its own dispatch stream, issues
// entry tokens to its users and applies the disconnect rules after the reconnect grace.
//
// A broker that stalls (a paused process, a network cut) past the heartbeat timeout is reaped
// by a dispatcher: its users leave the queue and their slots come back, while their streams are
// still open here. So the broker acts on every heartbeat's answer: when the store says its last
// heartbeat had lapsed, or none has succeeded for the heartbeat timeout, it ends every stream
// it holds and carries on under a new id (the old one's name with a lapse number), which no
// reaping of the old id can touch. Ending rather than re-entering the users keeps one path for
// every case, Redis reachable or not: the clients reconnect (the waiting page's EventSource
// does so by itself) and Join applies the reconnect grace, so a user the reaper had not taken
// yet keeps the place or admission, and one it had taken is queued again. No stream is left
// open for a user who is neither waiting nor admitted.
type Broker struct {
	q      ports.BrokerQueue
	rooms  *eventRooms
	rates  *AdmissionRates
	clock  ports.Clock
	base   string
	cfg    BrokerConfig
	obs    BrokerObserver
	log    *slog.Logger
	tracer ports.Tracer

	conns atomic.Uint64
	// live counts the connections registered and not yet left, for Close to wait on.
	live sync.WaitGroup

	mu sync.Mutex
	// id is the broker's current id: base, then base.N after its Nth lapse.
	id     string
	lapses int
	// beating: id has heartbeat; lastBeat is when its last heartbeat succeeded.
	beating  bool
	lastBeat time.Time
	subs     map[string]map[string]*Subscription // event → user → connection
	leaves   map[*time.Timer]struct{}
	closed   bool
}

// BrokerDeps are the ports a Broker runs on. Observer and Log may be nil.
type BrokerDeps struct {
	// Events and Seats are read to know an event, and with Rooms to open a room the store lost.
	Events ports.EventRepository
	Seats  ports.SeatRepository
	Rooms  ports.RoomOpener
	Queue  ports.BrokerQueue
	// Rates are the admission rates this instance's reconciliation measures (the Service's
	// Deps.Rates), for the positions' wait estimates.
	Rates    *AdmissionRates
	Clock    ports.Clock
	Observer BrokerObserver
	Log      *slog.Logger
	// Tracer traces each delivery of an admission as a trace of its own; nil: tracing is off.
	Tracer ports.Tracer
}

// NewBroker returns the broker brokerID (unique per process: a restarted process is a new
// broker).
func NewBroker(d BrokerDeps, brokerID string, cfg BrokerConfig) *Broker {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	return &Broker{q: d.Queue, rooms: newEventRooms(d.Events, d.Seats, d.Rooms, d.Clock), rates: d.Rates, clock: d.Clock,
		base: brokerID, id: brokerID, cfg: cfg.withDefaults(), obs: d.Observer, log: d.Log, tracer: tracerOr(d.Tracer),
		subs: make(map[string]map[string]*Subscription), leaves: make(map[*time.Timer]struct{})}
}

// ID is the broker's current id, the name of its dispatch stream: the one it was created with
// until its heartbeat first lapses.
func (b *Broker) ID() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.id
}

// ErrBrokerClosed: the broker is shutting down; the client reconnects to another instance.
var ErrBrokerClosed = fmt.Errorf("broker shutting down: %w", ports.ErrUnavailable)

// Join enters the user into a push event's queue over a new connection whose events go to
// stream (a reconnect keeps the place, or gets the same admission again). Errors: validation,
// waiting.ErrEventNotFound, waiting.ErrWrongMode, waiting.ErrSoldOut, unavailability; on an
// error there is nothing to Leave, and stream may have been ended.
func (b *Broker) Join(ctx context.Context, eventID, userID string, stream Stream) (*Subscription, error) {
	if err := domain.ValidateUserID("userId", userID); err != nil {
		return nil, err
	}
	budget := guard.NewBudget(b.cfg.Timeout)
	e, err := b.rooms.event(ctx, budget, eventID)
	if err != nil {
		return nil, err
	}
	if e.Mode() != waiting.ModePush {
		return nil, waiting.ErrWrongMode
	}
	sub := &Subscription{EventID: eventID, UserID: userID, stream: stream}
	if err := b.register(sub); err != nil {
		return nil, err
	}
	var place ports.QueuePlace
	err = b.rooms.inRoom(ctx, budget, eventID, func() error {
		place, err = b.q.Connect(ctx, eventID, userID, sub.owner)
		return err
	})
	// From here the store may hold the user for this connection even when the answer was lost
	// (a timeout): a failed join leaves as a connection does, so that nobody holds a place or a
	// slot without a stream.
	if err != nil {
		b.Leave(sub)
		if errors.Is(err, ports.ErrSoldOut) {
			return nil, waiting.ErrSoldOut
		}
		return nil, fmt.Errorf("connect to queue: %w", err)
	}
	b.tellReplaced(ctx, sub, place.Replaced)
	if place.Admitted {
		if err := b.deliver(ctx, e, []delivery{{sub: sub}}, ports.DispatchAck{}); err != nil {
			b.Leave(sub)
			return nil, err
		}
	}
	if place.Prequeue {
		stream.Prequeue(*prequeueViewOf(e))
	}
	return sub, nil
}

// tellReplaced tells another broker that held the user's connection, replaced by sub, to end
// it: register ends an older connection on this broker, and one left open elsewhere would never
// be sent the admission, which now goes to sub. It does so on its own goroutine, detached from
// the join's request: sub's client leaving at once must not leave the older stream stranded, and
// the join does not wait for it. A failure leaves that stream open until its client closes it.
func (b *Broker) tellReplaced(ctx context.Context, sub *Subscription, replaced string) {
	if replaced == "" || ports.OwnerBroker(replaced) == ports.OwnerBroker(sub.owner) {
		return
	}
	ctx = context.WithoutCancel(ctx)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, b.cfg.HeartbeatTimeout)
		defer cancel()
		if err := b.q.TellReplaced(ctx, sub.EventID, sub.UserID, replaced); err != nil {
			b.log.Warn("push broker could not tell another broker to end a replaced connection", "event", sub.EventID,
				"replaced", replaced, "error", err)
		}
	}()
}

// register names sub after the broker's current id and makes it the user's connection on this
// broker, ending an older one. Under the lock, so a lapse either ends sub or comes before it
// and sub carries the new id.
func (b *Broker) register(sub *Subscription) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrBrokerClosed
	}
	sub.owner = b.id + "|" + strconv.FormatUint(b.conns.Add(1), 10) + "|"
	users := b.subs[sub.EventID]
	if users == nil {
		users = make(map[string]*Subscription)
		b.subs[sub.EventID] = users
	}
	if old := users[sub.UserID]; old != nil {
		old.replaced()
	}
	users[sub.UserID] = sub
	b.live.Add(1)
	b.observeConnections(sub.EventID)
	return nil
}

// unregister forgets sub unless a newer connection replaced it; it reports whether it did.
func (b *Broker) unregister(sub *Subscription) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	users := b.subs[sub.EventID]
	if users[sub.UserID] != sub {
		return false
	}
	delete(users, sub.UserID)
	if len(users) == 0 {
		delete(b.subs, sub.EventID)
	}
	b.observeConnections(sub.EventID)
	return true
}

func (b *Broker) observeConnections(eventID string) {
	if b.obs != nil {
		b.obs.Connections(eventID, len(b.subs[eventID]))
	}
}

// Leave ends the connection, once per subscription Join returned: after the reconnect grace,
// unless the user connected again (anywhere) meanwhile, an admitted user's slot comes back and
// the token is deleted, a waiting user leaves the queue. A connection a newer one of its user
// replaced on this broker leaves nothing: register told it before the newer one's Connect, so
// its departure may reach the store first, where the user is still its own, and would take
// the place or the admission from the user's live stream; the newer connection's departure
// covers it instead (ports.BrokerQueue's Disconnect).
func (b *Broker) Leave(sub *Subscription) {
	defer b.live.Done()
	sub.end()
	if !b.unregister(sub) {
		return
	}
	disconnect := func() {
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.HeartbeatTimeout)
		defer cancel()
		// A failure leaves the user to the reaper once this broker's heartbeat stops, or to
		// the token's expiry; nothing leaks.
		_, _ = b.q.Disconnect(ctx, sub.EventID, sub.UserID, sub.owner)
	}
	if b.cfg.ReconnectGrace <= 0 {
		disconnect()
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	var timer *time.Timer
	timer = time.AfterFunc(b.cfg.ReconnectGrace, func() {
		b.mu.Lock()
		_, pending := b.leaves[timer]
		delete(b.leaves, timer)
		b.mu.Unlock()
		if pending {
			disconnect()
		}
	})
	b.leaves[timer] = struct{}{}
}

// delivery is an admitted user's connection to send the token to, and when the promotion ran
// (zero for an admission sent again on a reconnect).
type delivery struct {
	sub        *Subscription
	promotedAt time.Time
}

// deliver issues the admitted users' tokens of event e (the same one on a repeat) in one store
// call, which also acknowledges ack's dispatch messages, and sends them.
func (b *Broker) deliver(ctx context.Context, e *waiting.Event, ds []delivery, ack ports.DispatchAck) error {
	grants := make([]ports.TokenGrant, len(ds))
	for i, d := range ds {
		grants[i] = ports.TokenGrant{UserID: d.sub.UserID, Token: rand.Text()}
	}
	results, err := b.q.Issue(ctx, e.ID(), grants, e.TokenTTL(), ack)
	if err != nil {
		return fmt.Errorf("issue entry tokens: %w", err)
	}
	for i, res := range results {
		if res.Claimed {
			ds[i].sub.stream.Admitted(Admission{TokenView: tokenOf(res), PromotedAt: ds[i].promotedAt})
			if b.obs != nil {
				b.obs.Delivered(e.ID())
			}
		}
	}
	return nil
}

// Run heartbeats, broadcasts positions every tick and serves the dispatch stream until ctx ends.
func (b *Broker) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { b.serveDispatch(ctx) })
	b.Tick(ctx)
	onEveryTick(ctx, b.cfg.Tick, func() { b.Tick(ctx) })
	wg.Wait()
}

// onEveryTick runs fn every period until ctx ends.
func onEveryTick(ctx context.Context, period time.Duration, fn func()) {
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			fn()
		}
	}
}

// Tick heartbeats and sends every local waiting user's position: one snapshot per event.
func (b *Broker) Tick(ctx context.Context) {
	b.heartbeat(ctx)
	b.mu.Lock()
	events := make([]string, 0, len(b.subs))
	for eventID := range b.subs {
		events = append(events, eventID)
	}
	b.mu.Unlock()
	for _, eventID := range events {
		b.broadcast(ctx, eventID)
	}
}

// heartbeat renews the broker's id and acts on the answer (see Broker): a lapse, told by the
// store or by no heartbeat succeeding for the heartbeat timeout, ends every stream and moves the
// broker to a new id, whose lease then starts.
func (b *Broker) heartbeat(ctx context.Context) {
	b.mu.Lock()
	id, beating, lastBeat := b.id, b.beating, b.lastBeat
	b.mu.Unlock()
	renewed, err := b.q.Heartbeat(ctx, id, b.cfg.HeartbeatTimeout)
	if ctx.Err() != nil { // stopping: an unanswered heartbeat says nothing of the store
		return
	}
	now := b.clock.Now()
	switch {
	case err == nil && (renewed || !beating):
		b.mu.Lock()
		if b.id == id {
			b.beating, b.lastBeat = true, now
		}
		b.mu.Unlock()
		if b.obs != nil {
			b.obs.BrokerBeat()
		}
	case err == nil:
		b.lapse(id, "its heartbeat had lapsed; a dispatcher may have reaped its users", now)
		b.heartbeat(ctx) // the new id is not beating yet: this cannot lapse again
	case beating && now.Sub(lastBeat) >= b.cfg.HeartbeatTimeout:
		b.lapse(id, fmt.Sprintf("no heartbeat succeeded for %v (%v); a dispatcher may have reaped its users", b.cfg.HeartbeatTimeout, err), now)
	default:
		b.log.Warn("push broker heartbeat failed", "broker", id, "error", err)
	}
}

// lapse ends every stream of the broker's id and gives the broker a new one, unless id is
// already past.
func (b *Broker) lapse(id, cause string, now time.Time) {
	b.mu.Lock()
	if b.id != id {
		b.mu.Unlock()
		return
	}
	b.lapses++
	b.id = b.base + "." + strconv.Itoa(b.lapses)
	b.beating, b.lastBeat = false, now
	ended := 0
	for _, users := range b.subs {
		for _, sub := range users {
			sub.end()
			ended++
		}
	}
	newID := b.id
	b.mu.Unlock()
	b.log.Warn("push broker lapsed: ended every stream it held so their clients reconnect", "broker", id,
		"newBroker", newID, "streams", ended, "cause", cause)
	if b.obs != nil {
		b.obs.BrokerLapsed(ended)
	}
}

func (b *Broker) broadcast(ctx context.Context, eventID string) {
	start := time.Now()
	budget := guard.NewBudget(b.cfg.Timeout)
	var snap ports.QueueSnapshot
	err := b.rooms.inRoom(ctx, budget, eventID, func() error {
		var err error
		snap, err = b.q.Snapshot(ctx, eventID)
		return err
	})
	if err != nil {
		return
	}
	if snap.SoldOut {
		b.tellSoldOut(eventID)
		return
	}
	if snap.Prequeue {
		b.broadcastPrequeue(ctx, budget, eventID)
		return
	}
	type update struct {
		sub       *Subscription
		rank      int
		predicted bool
	}
	// The streams are told after the lock is released: dispatches and leaves need it meanwhile.
	b.mu.Lock()
	users := b.subs[eventID]
	updates := make([]update, 0, len(users))
	for rank, userID := range snap.Waiting {
		if sub := users[userID]; sub != nil {
			updates = append(updates, update{sub: sub, rank: rank, predicted: sub.predicted})
		}
	}
	b.mu.Unlock()
	now := b.clock.Now()
	first := make(map[string]int)
	var firstSubs []*Subscription
	for _, u := range updates {
		ahead := aheadCount(u.rank, snap.RemainingSlots)
		estimate := b.rates.estimate(eventID, ahead, now)
		u.sub.stream.Position(Position{Tick: start, PositionView: PositionView{Rank: u.rank, AheadCount: ahead,
			QueueSize: len(snap.Waiting), EstimatedWaitSeconds: estimate}})
		if estimate != nil && !u.predicted {
			first[u.sub.UserID] = *estimate
			firstSubs = append(firstSubs, u.sub)
		}
	}
	b.predict(ctx, eventID, first, firstSubs)
	if b.obs != nil {
		b.obs.Broadcast(eventID, time.Since(start))
	}
}

// broadcastPrequeue tells every local user of an event whose pre-queue is not placed yet that
// they are in it. Reading the event spends budget.
func (b *Broker) broadcastPrequeue(ctx context.Context, budget *guard.Budget, eventID string) {
	e, err := b.rooms.event(ctx, budget, eventID)
	if err != nil {
		return
	}
	view := prequeueViewOf(e)
	if view == nil {
		return
	}
	b.mu.Lock()
	streams := make([]Stream, 0, len(b.subs[eventID]))
	for _, sub := range b.subs[eventID] {
		streams = append(streams, sub.stream)
	}
	b.mu.Unlock()
	for _, stream := range streams {
		stream.Prequeue(*view)
	}
}

// predict records the first wait estimates this tick sent (for the wait accuracy) in one store
// call; the connections are marked once it succeeded, so a failure is tried on the next tick.
func (b *Broker) predict(ctx context.Context, eventID string, seconds map[string]int, subs []*Subscription) {
	if len(subs) == 0 {
		return
	}
	if err := b.q.Predict(ctx, eventID, seconds); err != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, sub := range subs {
		sub.predicted = true
	}
}

// tellSoldOut tells every local connection to a sold-out event, each of which then ends (and
// leaves: nobody is left waiting for seats that do not exist).
func (b *Broker) tellSoldOut(eventID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, sub := range b.subs[eventID] {
		sub.soldOut()
	}
}

// serveDispatch reads this broker's dispatch stream: each promotion of a user connected here
// gets the token; one whose user is gone is left to the disconnect rule already pending. A
// batch costs two store calls whatever its size: the blocking read that brings it and one Issue
// per event, the first of which also acknowledges the batch delivered before; a read that finds
// nothing for a tick acknowledges it on its own.
func (b *Broker) serveDispatch(ctx context.Context) {
	var (
		// delivered are messages of deliveredFrom's stream done with and not yet acknowledged.
		delivered     []string
		deliveredFrom = b.ID()
		// failed counts the messages whose delivery failed (Redis slow or down): they stay
		// unacknowledged, holding the promoted users' slots, and are read again a tick later.
		failed int
	)
	for ctx.Err() == nil {
		// After a lapse the broker reads its new id's stream; the old one's is the reaper's,
		// less what was delivered from it.
		id := b.ID()
		if id != deliveredFrom {
			b.ackDispatch(ctx, deliveredFrom, delivered)
			delivered, deliveredFrom, failed = nil, id, 0
		}
		var retryAfter time.Duration
		if failed > 0 {
			// Only unacknowledged messages are read again, so the delivered ones go first.
			if b.ackDispatch(ctx, id, delivered) {
				delivered = nil
			}
			retryAfter = b.cfg.Tick
		}
		batch, err := b.q.ReadDispatch(ctx, id, routeBatch, b.cfg.Tick, retryAfter)
		if ctx.Err() != nil {
			break // a batch read meanwhile stays unacknowledged, the reaper's once the heartbeat stops
		}
		if err != nil {
			sleep(ctx, b.cfg.Tick)
			continue
		}
		if len(batch) == 0 {
			if b.ackDispatch(ctx, id, delivered) {
				delivered = nil
			}
			continue
		}
		failed = max(0, failed-reclaimed(batch))
		var failedNow int
		delivered, failedNow = b.deliverBatch(ctx, id, batch, delivered)
		failed += failedNow
	}
	b.ackDispatch(context.WithoutCancel(ctx), deliveredFrom, delivered)
}

// ackDispatch acknowledges messages of brokerID's dispatch stream delivered and reports whether
// it did. One left unacknowledged when the broker moves on from the stream is reclaimed by the
// reaper, whose disconnect of a user still held by that id's connection is what the stream's
// end means anyway.
func (b *Broker) ackDispatch(ctx context.Context, brokerID string, delivered []string) bool {
	if len(delivered) == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Tick)
	defer cancel()
	if err := b.q.AckDispatch(ctx, brokerID, delivered); err != nil {
		b.log.Warn("push broker could not acknowledge delivered admissions", "broker", brokerID, "error", err)
		return false
	}
	return true
}

// deliverBatch delivers a batch of brokerID's dispatch messages, one Issue per event (at once),
// the first of which also acknowledges acks, and ends the connections another broker replaced.
// It answers the messages to acknowledge now: the batch's delivered, replaced or whose user is
// not connected here, and acks unless acknowledged; and how many of the batch failed (left
// unacknowledged).
func (b *Broker) deliverBatch(ctx context.Context, brokerID string, batch []ports.Promotion, acks []string) ([]string, int) {
	type eventBatch struct {
		eventID string
		ps      []ports.Promotion
		ds      []delivery
		ack     ports.DispatchAck
	}
	byEvent := make(map[string]*eventBatch)
	var events []*eventBatch
	var replacedDone []string
	b.mu.Lock()
	for _, p := range batch {
		if p.Replaced {
			if sub := b.subs[p.EventID][p.UserID]; sub != nil && sub.owner == p.Owner {
				sub.replaced()
			}
			replacedDone = append(replacedDone, p.MessageID)
			continue
		}
		eb := byEvent[p.EventID]
		if eb == nil {
			eb = &eventBatch{eventID: p.EventID}
			byEvent[p.EventID] = eb
			events = append(events, eb)
		}
		eb.ps = append(eb.ps, p)
		if sub := b.subs[p.EventID][p.UserID]; sub != nil {
			eb.ds = append(eb.ds, delivery{sub: sub, promotedAt: p.PromotedAt})
		}
	}
	b.mu.Unlock()
	var (
		mu     sync.Mutex
		done   []string
		failed int
		g      errgroup.Group
	)
	for _, eb := range events {
		if len(eb.ds) > 0 {
			eb.ack = ports.DispatchAck{BrokerID: brokerID, MessageIDs: acks}
			acks = nil
			break
		}
	}
	g.SetLimit(routeParallelism)
	for _, eb := range events {
		g.Go(func() error {
			var err error
			if len(eb.ds) > 0 {
				err = b.deliverTraced(ctx, eb.eventID, eb.ds, eb.ack)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				// The event's messages stay unacknowledged; those it was to acknowledge wait.
				failed += len(eb.ps)
				done = append(done, eb.ack.MessageIDs...)
				return nil
			}
			for _, p := range eb.ps {
				done = append(done, p.MessageID)
			}
			return nil
		})
	}
	_ = g.Wait()
	return append(append(done, acks...), replacedDone...), failed
}

// deliverTraced delivers ds, admissions of eventID, in a trace of its own, acknowledging ack.
func (b *Broker) deliverTraced(ctx context.Context, eventID string, ds []delivery, ack ports.DispatchAck) (err error) {
	ctx, span := b.tracer.StartRoot(ctx, spanDeliver)
	span.SetString(attrEventID, eventID)
	span.SetInt(attrDelivered, len(ds))
	defer func() { span.End(err) }()
	e, err := b.rooms.event(ctx, guard.NewBudget(b.cfg.Timeout), eventID)
	if err != nil {
		return err
	}
	return b.deliver(ctx, e, ds, ack)
}

// Close ends every connection and drops the pending disconnects: those users reconnect to
// another instance, or the reaper applies the rules once this broker's heartbeat stops. Then it
// waits, until ctx ends, for every connection to have left.
func (b *Broker) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	for timer := range b.leaves {
		timer.Stop()
	}
	clear(b.leaves)
	for _, users := range b.subs {
		for _, sub := range users {
			sub.end()
		}
	}
	b.mu.Unlock()
	left := make(chan struct{})
	go func() {
		b.live.Wait()
		close(left)
	}()
	select {
	case <-left:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the push connections to leave: %w", ctx.Err())
	}
}

// Dispatcher promotes the head of every push event's queue into its entry stream each tick,
// in a bounded pool, routes each promotion to the dispatch stream of the broker holding the
// user, and reaps dead brokers. Any number of dispatchers may run at once.
//
// A dispatcher holds no lease, so a stalled one (a paused process, a network cut) holds only
// what it had read and not acknowledged: entry messages, whose users are admitted with the
// token pending. Every other dispatcher promotes meanwhile, and reclaims those entries once
// they have been idle for the heartbeat timeout (XAUTOCLAIM on Redis); without another
// dispatcher, the stalled one routes them itself when it resumes, as its pending entries come
// back to it the same way. A resumed dispatcher's routing of a message another one already
// routed is harmless: the broker's Issue answers the same token, or nothing to a user no
// longer admitted, and promotion is one atomic script, so nobody is promoted twice and no slot
// is taken twice. A reap it resumes after the broker came back touches only the broker's old
// id (see Broker). After a tick that could not reach the store it reaps nobody for a heartbeat
// timeout (deadBrokers).
type Dispatcher struct {
	q      ports.DispatchQueue
	index  ports.RoomIndex
	rooms  *eventRooms
	clock  ports.Clock
	id     string
	cfg    DispatcherConfig
	obs    DispatcherObserver
	log    *slog.Logger
	tracer ports.Tracer
	tasks  chan promotion

	routedMu sync.Mutex
	// routed are, per event, the entry messages this dispatcher dispatched and has not
	// acknowledged: the event's next promotion does, in its own store call.
	routed map[string][]string

	reapMu sync.Mutex
	// unreached: a tick found the store unavailable since the last that reached it.
	unreached bool
	// reapFrom: no broker is reaped before it (deadBrokers).
	reapFrom time.Time
}

// DispatcherDeps are the ports a Dispatcher runs on. Observer and Log may be nil.
type DispatcherDeps struct {
	// Events and Seats are read to know an event, and with Rooms to open a room the store lost.
	Events ports.EventRepository
	Seats  ports.SeatRepository
	Rooms  ports.RoomOpener
	// Index lists the events whose rooms are in use, the ones to promote.
	Index    ports.RoomIndex
	Queue    ports.DispatchQueue
	Clock    ports.Clock
	Observer DispatcherObserver
	Log      *slog.Logger
	// Tracer traces each promotion as a trace of its own; nil: tracing is off.
	Tracer ports.Tracer
}

// NewDispatcher returns the dispatcher dispatcherID (its consumer name; unique per process).
func NewDispatcher(d DispatcherDeps, dispatcherID string, cfg DispatcherConfig) *Dispatcher {
	cfg = cfg.withDefaults()
	if d.Log == nil {
		d.Log = slog.Default()
	}
	return &Dispatcher{q: d.Queue, index: d.Index, rooms: newEventRooms(d.Events, d.Seats, d.Rooms, d.Clock), clock: d.Clock,
		id: dispatcherID, cfg: cfg, obs: d.Observer, log: d.Log, tracer: tracerOr(d.Tracer), tasks: make(chan promotion, cfg.PromotionBacklog),
		routed: make(map[string][]string)}
}

// Run promotes every tick until ctx ends, then waits for its workers. A tick that comes more
// than the heartbeat timeout after the last one is a stall, logged and counted.
func (d *Dispatcher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range d.cfg.PromotionWorkers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case p := <-d.tasks:
					d.observeBacklog()
					_ = d.promote(ctx, p.budget, p.eventID)
				}
			}
		})
	}
	last := d.clock.Now()
	onEveryTick(ctx, d.cfg.Tick, func() {
		now := d.clock.Now()
		if gap := now.Sub(last); gap > d.cfg.HeartbeatTimeout {
			d.log.Warn("push dispatcher stalled: entries it held may have been routed by another dispatcher",
				"dispatcher", d.id, "gap", gap.Round(time.Millisecond).String())
			if d.obs != nil {
				d.obs.DispatcherStalled(gap)
			}
		}
		last = now
		err := d.Tick(ctx)
		switch {
		case err == nil && d.obs != nil:
			d.obs.DispatcherTicked()
		case err != nil && ctx.Err() == nil:
			d.log.Warn("push dispatcher tick failed", "dispatcher", d.id, "error", err)
		}
	})
	wg.Wait()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Tick)
	defer cancel()
	if err := d.acknowledgeRouted(stopCtx, nil); err != nil {
		d.log.Warn("push dispatcher stopped with routed entries unacknowledged: another dispatcher routes them again",
			"dispatcher", d.id, "error", err)
	}
}

func (d *Dispatcher) observeBacklog() {
	if d.obs != nil {
		d.obs.PromotionBacklog(len(d.tasks))
	}
}

// noteUnreached records that the store did not answer a tick (err is unavailability).
func (d *Dispatcher) noteUnreached(err error) {
	if errors.Is(err, ports.ErrUnavailable) {
		d.reapMu.Lock()
		d.unreached = true
		d.reapMu.Unlock()
	}
}

// deadBrokers lists the brokers whose heartbeat lapsed, to reap; none until a heartbeat
// timeout after the store answers again, once a tick found it unavailable. While it was, no
// broker could beat, so a heartbeat that lapsed then says nothing of its broker: every broker
// ended its streams when its own heartbeats failed, and a Redis restarted from its append-only
// file brings every heartbeat back expired. The clients then have a heartbeat timeout to
// reconnect and keep their places and admissions, as when a broker dies; a broker that really
// died meanwhile is reaped that much later.
func (d *Dispatcher) deadBrokers(ctx context.Context) ([]string, error) {
	now := d.clock.Now()
	d.reapMu.Lock()
	if d.unreached {
		d.unreached, d.reapFrom = false, now.Add(d.cfg.HeartbeatTimeout)
	}
	held := now.Before(d.reapFrom)
	d.reapMu.Unlock()
	if held {
		return nil, nil
	}
	return d.q.DeadBrokers(ctx)
}

// Tick reaps dead brokers, then hands every push event to the pool; when the pool's backlog is
// full the event is promoted here, which slows the ticks down instead of queueing without
// bound. It returns the first error.
func (d *Dispatcher) Tick(ctx context.Context) error {
	events, err := d.index.Events(ctx)
	if err != nil {
		d.noteUnreached(err)
		return fmt.Errorf("list waiting rooms: %w", err)
	}
	dead, err := d.deadBrokers(ctx)
	if err != nil {
		d.noteUnreached(err)
		return fmt.Errorf("list dead brokers: %w", err)
	}
	errs := []error{d.acknowledgeRouted(ctx, events)}
	for _, brokerID := range dead {
		slots, err := d.q.ReapBroker(ctx, brokerID, events)
		if err != nil {
			errs = append(errs, fmt.Errorf("reap broker %s: %w", brokerID, err))
			continue
		}
		d.log.Warn("push broker reaped: silent past the heartbeat timeout; its users' slots are back",
			"broker", brokerID, "slots", slots)
		if d.obs != nil {
			d.obs.BrokerReaped(slots)
		}
	}
	for _, eventID := range events {
		budget := guard.NewBudget(d.cfg.Timeout)
		e, err := d.rooms.event(ctx, budget, eventID)
		if err != nil || e.Mode() != waiting.ModePush {
			continue
		}
		select {
		case d.tasks <- promotion{eventID: eventID, budget: budget}:
			d.observeBacklog()
		default:
			if err := d.promote(ctx, budget, eventID); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// promotion is an event handed to the promotion workers, with the budget its tick's read of the
// event spent from: an event's promotion costs one DispatcherConfig.Timeout in all, its wait
// for a worker aside.
type promotion struct {
	eventID string
	budget  *guard.Budget
}

// Promote runs the event's promotion script once, which also acknowledges the entries routed
// before and reads the first batch of its entry stream, then routes it. Its database reads (the
// event, and those that open a room the store lost) share one DispatcherConfig.Timeout.
func (d *Dispatcher) Promote(ctx context.Context, eventID string) error {
	return d.promote(ctx, guard.NewBudget(d.cfg.Timeout), eventID)
}

// promote is Promote, its database reads spending budget.
func (d *Dispatcher) promote(ctx context.Context, budget *guard.Budget, eventID string) (err error) {
	ctx, span := d.tracer.StartRoot(ctx, spanPromote)
	span.SetString(attrEventID, eventID)
	var n int
	defer func() { span.SetInt(attrPromoted, n); span.End(err) }()
	e, err := d.rooms.event(ctx, budget, eventID)
	if err != nil {
		return err
	}
	start := time.Now()
	read := d.entryRead(d.takeRouted(eventID))
	var batch []ports.Promotion
	err = d.rooms.inRoom(ctx, budget, eventID, func() error {
		n, batch, err = d.q.Promote(ctx, eventID, e.TokenTTL(), read)
		return err
	})
	if err != nil {
		d.keepRouted(eventID, read.Routed) // acknowledging again is harmless
		return fmt.Errorf("promote event %s: %w", eventID, err)
	}
	if d.obs != nil {
		d.obs.Promoted(eventID, n, time.Since(start))
	}
	return d.route(ctx, eventID, batch)
}

// entryRead reads a batch of entries for this dispatcher, acknowledging routed.
func (d *Dispatcher) entryRead(routed []string) ports.EntryRead {
	return ports.EntryRead{Consumer: d.id, Routed: routed, Count: routeBatch, ReclaimIdle: d.cfg.HeartbeatTimeout}
}

// route sends each entry message of batch, and of the batches after it while reads come back
// full, to the broker holding its user; a user with no connection owner already departed (its
// slot came back then). Each read acknowledges the batch routed before it, and the last batch
// is acknowledged by the event's next promotion, so a tick whose promotion fits in one batch
// costs two store calls: the promotion and the dispatch. A routed entry left unacknowledged by
// a dispatcher that died is reclaimed after the heartbeat timeout and routed again, which the
// broker's Issue makes harmless (see Dispatcher).
func (d *Dispatcher) route(ctx context.Context, eventID string, batch []ports.Promotion) error {
	for len(batch) > 0 {
		if n := reclaimed(batch); n > 0 {
			d.log.Warn("push dispatcher routes entries left unacknowledged past the heartbeat timeout (a stalled or dead dispatcher)",
				"dispatcher", d.id, "event", eventID, "entries", n)
			if d.obs != nil {
				d.obs.EntriesReclaimed(eventID, n)
			}
		}
		// A failed dispatch leaves the batch unacknowledged: it is reclaimed and routed again.
		if err := d.q.Dispatch(ctx, batch); err != nil {
			return err
		}
		routed := make([]string, len(batch))
		for i, p := range batch {
			routed[i] = p.MessageID
		}
		if len(batch) < routeBatch {
			d.keepRouted(eventID, routed)
			return nil
		}
		var err error
		if batch, err = d.q.ReadEntries(ctx, eventID, d.entryRead(routed)); err != nil {
			d.keepRouted(eventID, routed)
			return err
		}
	}
	return nil
}

// takeRouted takes the event's routed entries to acknowledge; keepRouted gives some back.
func (d *Dispatcher) takeRouted(eventID string) []string {
	d.routedMu.Lock()
	defer d.routedMu.Unlock()
	routed := d.routed[eventID]
	delete(d.routed, eventID)
	return routed
}

func (d *Dispatcher) keepRouted(eventID string, routed []string) {
	if len(routed) == 0 {
		return
	}
	d.routedMu.Lock()
	defer d.routedMu.Unlock()
	d.routed[eventID] = append(d.routed[eventID], routed...)
}

// acknowledgeRouted acknowledges the routed entries of every event but those listed, whose
// next promotions will: an event out of use, or all of them when the dispatcher stops. An entry
// left unacknowledged would be routed again by another dispatcher.
func (d *Dispatcher) acknowledgeRouted(ctx context.Context, listed []string) error {
	d.routedMu.Lock()
	var events []string
	for eventID := range d.routed {
		if !slices.Contains(listed, eventID) {
			events = append(events, eventID)
		}
	}
	d.routedMu.Unlock()
	var errs []error
	for _, eventID := range events {
		routed := d.takeRouted(eventID)
		if _, err := d.q.ReadEntries(ctx, eventID, ports.EntryRead{Consumer: d.id, Routed: routed}); err != nil {
			d.keepRouted(eventID, routed)
			errs = append(errs, fmt.Errorf("acknowledge routed entries of event %s: %w", eventID, err))
		}
	}
	return errors.Join(errs...)
}

// reclaimed counts the batch's messages read before and left unacknowledged.
func reclaimed(batch []ports.Promotion) int {
	n := 0
	for _, p := range batch {
		if p.Reclaimed {
			n++
		}
	}
	return n
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// The push mode's spans: each starts a trace of its own, since a tick's work serves no one
// request.
const (
	spanPromote   = "waiting.promote" // one event's promotion and routing
	spanDeliver   = "waiting.deliver" // a batch of one event's admissions delivered to their streams
	attrEventID   = "rushgate.event_id"
	attrPromoted  = "rushgate.promoted"
	attrDelivered = "rushgate.delivered"
)

// tracerOr is t, or NoTracer when t is nil.
func tracerOr(t ports.Tracer) ports.Tracer {
	if t == nil {
		return ports.NoTracer{}
	}
	return t
}
