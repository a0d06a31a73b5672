package relay_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/dataplatform"
	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/memory/memorytest"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/application/relay"
	"github.com/rushgate/rushgate/domain/outbox"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

// platform is a fake data platform over real HTTP: it fails the first `failures` calls of each
// message with 503, then accepts; it records each call and notices two sends of one message at
// the same time.
type platform struct {
	failures int

	mu          sync.Mutex
	calls       map[string]int
	bodies      map[string]string
	inFlight    map[string]bool
	overlapping atomic.Int32
}

func newPlatform(t *testing.T, failures int) (*platform, ports.DataPlatform) {
	p := &platform{failures: failures, calls: map[string]int{}, bodies: map[string]string{}, inFlight: map[string]bool{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Idempotency-Key")
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		if p.inFlight[id] {
			p.overlapping.Add(1)
		}
		p.inFlight[id] = true
		p.calls[id]++
		n := p.calls[id]
		p.bodies[id] = string(body)
		p.mu.Unlock()
		time.Sleep(time.Millisecond) // a send takes a moment, so overlaps can show
		p.mu.Lock()
		p.inFlight[id] = false
		p.mu.Unlock()
		if n <= p.failures {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	return p, dataplatform.New(srv.URL, time.Second)
}

func (p *platform) callsOf(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[id]
}

// counts records the observer's reports.
type counts struct {
	pending, failed, gaveUp atomic.Int64
}

func (c *counts) OutboxCounted(pending, failed int) {
	c.pending.Store(int64(pending))
	c.failed.Store(int64(failed))
}
func (c *counts) OutboxGaveUp() { c.gaveUp.Add(1) }

type fixture struct {
	clock  *memory.Clock
	stores ports.Stores
	alerts *memory.Alerts
	counts *counts
}

func newRelay(f *fixture, p ports.DataPlatform) *relay.Service {
	return relay.NewService(relay.Deps{Outbox: f.stores.Outbox, Platform: p, Notifier: f.alerts, Clock: f.clock,
		IDs: system.UUIDs{}, Observer: f.counts}, relay.Config{})
}

func newFixture() *fixture {
	env := memorytest.New()
	return &fixture{clock: env.FakeClock, stores: env.Stores, alerts: &memory.Alerts{}, counts: &counts{}}
}

func (f *fixture) add(t *testing.T) outbox.Message {
	t.Helper()
	m := outbox.New(system.UUIDs{}.NewID(), []byte(`{"order":"`+fmt.Sprint(time.Now().UnixNano())+`"}`), f.clock.Now())
	if err := f.stores.Outbox.Add(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *fixture) stored(t *testing.T, id string) outbox.Message {
	t.Helper()
	m, err := f.stores.Outbox.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func relayOnce(t *testing.T, r *relay.Service) relay.Round {
	t.Helper()
	round, err := r.Relay(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return round
}

// TestRelay_DeliversExactlyWhenTheScheduleSays: a platform failing twice then accepting is
// called at t0, t0+1m and t0+1m+5m, never between, always with the message's own id as
// Idempotency-Key and its payload as body; the message ends SENT.
func TestRelay_DeliversExactlyWhenTheScheduleSays(t *testing.T) {
	f := newFixture()
	p, platformClient := newPlatform(t, 2)
	r := newRelay(f, platformClient)
	m := f.add(t)
	t0 := f.clock.Now()

	steps := []struct {
		at    time.Duration
		calls int
	}{
		{0, 1},
		{time.Minute - time.Microsecond, 1},
		{time.Minute, 2},
		{6*time.Minute - time.Microsecond, 2},
		{6 * time.Minute, 3},
		{2 * time.Hour, 3},
	}
	for _, step := range steps {
		f.clock.Advance(t0.Add(step.at).Sub(f.clock.Now()))
		relayOnce(t, r)
		if got := p.callsOf(m.ID); got != step.calls {
			t.Fatalf("at t0+%v: %d calls, want %d", step.at, got, step.calls)
		}
	}
	stored := f.stored(t, m.ID)
	if stored.Status != outbox.Sent || stored.SentAt == nil || !stored.SentAt.Equal(t0.Add(6*time.Minute)) || stored.Attempts != 2 {
		t.Fatalf("stored %+v", stored)
	}
	if p.bodies[m.ID] != string(m.Payload) {
		t.Fatalf("body %q, want %q", p.bodies[m.ID], m.Payload)
	}
	if len(f.alerts.Raised()) != 0 || f.counts.pending.Load() != 0 {
		t.Fatalf("alerts %v, pending %d", f.alerts.Raised(), f.counts.pending.Load())
	}
}

// TestRelay_GivesUpAfterTheThirdRetryWithAnAlert: a platform that never accepts is called four
// times (the send and three retries), then the message is FAILED with its last error, counted,
// and alerted on once; an operator's retry puts it back with its whole schedule.
func TestRelay_GivesUpAfterTheThirdRetryWithAnAlert(t *testing.T) {
	f := newFixture()
	p, platformClient := newPlatform(t, 1000)
	r := newRelay(f, platformClient)
	m := f.add(t)
	for _, wait := range []time.Duration{0, time.Minute, 5 * time.Minute, 30 * time.Minute, 24 * time.Hour} {
		f.clock.Advance(wait)
		relayOnce(t, r)
	}
	if got := p.callsOf(m.ID); got != 4 {
		t.Fatalf("%d calls, want 4", got)
	}
	stored := f.stored(t, m.ID)
	if stored.Status != outbox.Failed || stored.Attempts != 4 || stored.LastError == "" {
		t.Fatalf("stored %+v", stored)
	}
	if len(f.alerts.Raised()) != 1 || f.alerts.Raised()[0].Fields["messageId"] != m.ID || f.counts.gaveUp.Load() != 1 || f.counts.failed.Load() != 1 {
		t.Fatalf("alerts %+v, gave up %d, failed gauge %d", f.alerts.Raised(), f.counts.gaveUp.Load(), f.counts.failed.Load())
	}

	view, err := r.Retry(context.Background(), m.ID)
	if err != nil || view.Status != "PENDING" || view.Attempts != 0 {
		t.Fatalf("retry: %+v, %v", view, err)
	}
	if _, err := r.Retry(context.Background(), m.ID); err == nil {
		t.Fatal("a PENDING message was retried")
	}
}

// stalledPlatform takes each send until its context ends, telling started when one began.
type stalledPlatform struct{ started chan struct{} }

func (p stalledPlatform) Send(ctx context.Context, _ string, _ []byte) error {
	p.started <- struct{}{}
	<-ctx.Done()
	return ctx.Err()
}

// TestRelay_AShutdownMidSendSpendsNoAttempt: a relay stopped while the platform has not
// answered (a deploy's SIGTERM) records no failure: the message keeps its attempts, and its
// last retry does not turn FAILED and alert about a platform that refused nothing.
func TestRelay_AShutdownMidSendSpendsNoAttempt(t *testing.T) {
	f := newFixture()
	_, failing := newPlatform(t, 1000)
	m := f.add(t)
	for _, wait := range []time.Duration{0, time.Minute, 5 * time.Minute} {
		f.clock.Advance(wait)
		relayOnce(t, newRelay(f, failing))
	}
	f.clock.Advance(30 * time.Minute) // the last retry is due
	stalled := stalledPlatform{started: make(chan struct{}, 1)}
	ctx, stop := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_, _ = newRelay(f, stalled).Relay(ctx) // a stopped round may say it was stopped
	}()
	<-stalled.started
	stop()
	<-ended
	if stored := f.stored(t, m.ID); stored.Status != outbox.Pending || stored.Attempts != 3 {
		t.Fatalf("after a shutdown mid-send: %+v, want PENDING with its 3 attempts", stored)
	}
	if len(f.alerts.Raised()) != 0 || f.counts.gaveUp.Load() != 0 {
		t.Fatalf("alerts %+v, gave up %d: a shutdown is no failure of the platform", f.alerts.Raised(), f.counts.gaveUp.Load())
	}
}

// TestRelay_TwoRelaysNeverSendAMessageTwiceAtOnce: two relays draining 300 due messages at the
// same time send each exactly once (the platform accepts at once), never two at the same time.
func TestRelay_TwoRelaysNeverSendAMessageTwiceAtOnce(t *testing.T) {
	f := newFixture()
	p, platformClient := newPlatform(t, 0)
	first, second := newRelay(f, platformClient), newRelay(f, platformClient)
	var ids []string
	for range 300 {
		ids = append(ids, f.add(t).ID)
	}
	relays := []*relay.Service{first, second}
	rounds, errs := make([]relay.Round, len(relays)), make([]error, len(relays))
	testkit.StartTogether(len(relays), func(i int) { rounds[i], errs[i] = relays[i].Relay(context.Background()) })
	for i := range rounds {
		if errs[i] != nil || rounds[i].Sent == 0 {
			// Both must have sent, or the relays never ran side by side and nothing was shown.
			t.Fatalf("relay %d: sent %d, %v", i, rounds[i].Sent, errs[i])
		}
	}
	if n := p.overlapping.Load(); n != 0 {
		t.Fatalf("%d sends overlapped another send of the same message", n)
	}
	for _, id := range ids {
		if got := p.callsOf(id); got != 1 {
			t.Fatalf("message %s sent %d times", id, got)
		}
		if f.stored(t, id).Status != outbox.Sent {
			t.Fatalf("message %s not SENT", id)
		}
	}
}

// TestRelay_SendSoonDeliversWithoutARound: a message queued with SendSoon is sent by the
// immediate senders with no relay round.
func TestRelay_SendSoonDeliversWithoutARound(t *testing.T) {
	f := newFixture()
	p, platformClient := newPlatform(t, 0)
	r := newRelay(f, platformClient)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.RunSenders(ctx); close(done) }()
	m := f.add(t)
	r.SendSoon(m.ID)
	testkit.Eventually(t, 10*time.Second, "the message sent", func() error {
		if status := f.stored(t, m.ID).Status; status != outbox.Sent {
			return fmt.Errorf("status %s", status)
		}
		return nil
	})
	cancel()
	<-done
	if got := p.callsOf(m.ID); got != 1 {
		t.Fatalf("%d calls", got)
	}
}
