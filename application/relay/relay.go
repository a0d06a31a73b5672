// Package relay delivers the transactional outbox to the data platform: an immediate send of
// each new message through a bounded pool of senders, and rounds that claim every due PENDING
// message (so concurrent relays never send one message at the same time), send it, and record
// the outcome on the retry schedule, giving up with an error log, a metric and an alert once
// the schedule is spent. Delivery is at least once; each message carries a stable id. It
// depends on ports only.
package relay

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/outbox"
	"github.com/rushgate/rushgate/ports"
)

// Defaults of Config.
const (
	DefaultBatchSize   = 100
	DefaultSendTimeout = 3 * time.Second
	DefaultSenders     = 8
	DefaultQueue       = 1024
)

// DefaultBackoff is the default schedule: retries after 1, 5 and 30 minutes.
var DefaultBackoff = outbox.Schedule{time.Minute, 5 * time.Minute, 30 * time.Minute}

// Config tunes the relay. The zero value of a field takes its default.
type Config struct {
	// Backoff is the waits before retries 1, 2, …; DefaultBackoff when empty.
	Backoff outbox.Schedule
	// BatchSize bounds one claim; DefaultBatchSize.
	BatchSize int
	// SendTimeout bounds one send; DefaultSendTimeout.
	SendTimeout time.Duration
	// Senders is how many sends run at once, in the immediate pool and within a round;
	// DefaultSenders.
	Senders int
	// Queue bounds the messages waiting for an immediate send; one more is left to the next
	// round. DefaultQueue.
	Queue int
}

func (c Config) withDefaults() Config {
	if len(c.Backoff) == 0 {
		c.Backoff = DefaultBackoff
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.SendTimeout <= 0 {
		c.SendTimeout = DefaultSendTimeout
	}
	if c.Senders <= 0 {
		c.Senders = DefaultSenders
	}
	if c.Queue <= 0 {
		c.Queue = DefaultQueue
	}
	return c
}

// Observer receives the relay's numbers for metrics; its methods must be cheap and safe for
// concurrent use.
type Observer interface {
	// OutboxCounted reports the PENDING and FAILED messages after a round.
	OutboxCounted(pending, failed int)
	// OutboxGaveUp counts a message turned FAILED.
	OutboxGaveUp()
}

// Deps are the ports the relay runs on. Observer, Logger and Tracer may be nil.
type Deps struct {
	Outbox   ports.OutboxRepository
	Platform ports.DataPlatform
	Notifier ports.Notifier
	Clock    ports.Clock
	IDs      ports.IDGenerator
	Observer Observer
	Logger   *slog.Logger
	// Tracer traces each delivery in a trace of its own, linked to the request that wrote the
	// message; the platform adapter sends the delivery's span on.
	Tracer ports.Tracer
}

// Service relays the outbox.
type Service struct {
	d    Deps
	cfg  Config
	soon chan string
}

// NewService returns a relay.
func NewService(d Deps, cfg Config) *Service {
	cfg = cfg.withDefaults()
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Tracer == nil {
		d.Tracer = ports.NoTracer{}
	}
	return &Service{d: d, cfg: cfg, soon: make(chan string, cfg.Queue)}
}

// lease is how long a claim holds its messages: long enough for a whole batch of sends at
// Senders at a time, each bounded by SendTimeout, so a live relay never loses its claim.
func (s *Service) lease() time.Duration {
	rounds := (s.cfg.BatchSize + s.cfg.Senders - 1) / s.cfg.Senders
	return time.Duration(rounds+1) * s.cfg.SendTimeout
}

// SendSoon queues a committed message for the immediate senders without blocking; when the
// queue is full the message waits for the next round.
func (s *Service) SendSoon(messageID string) {
	select {
	case s.soon <- messageID:
	default:
	}
}

// RunSenders runs the pool of immediate senders until ctx ends.
func (s *Service) RunSenders(ctx context.Context) {
	var wg sync.WaitGroup
	for range s.cfg.Senders {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case id := <-s.soon:
					if _, err := s.claimAndSend(ctx, ports.OutboxClaim{ID: id, Limit: 1}); err != nil && ctx.Err() == nil {
						s.d.Logger.Warn("immediate outbox send failed; the relay retries", "messageId", id, "error", err)
					}
				}
			}
		})
	}
	wg.Wait()
}

// Round is what one relay round did.
type Round struct {
	Sent, Retrying, Failed int
}

// Relay claims and sends due messages, BatchSize at a time, until none is due, then reports the
// PENDING and FAILED counts to the Observer.
func (s *Service) Relay(ctx context.Context) (Round, error) {
	var total Round
	for {
		r, err := s.claimAndSend(ctx, ports.OutboxClaim{Limit: s.cfg.BatchSize})
		total.Sent, total.Retrying, total.Failed = total.Sent+r.Sent, total.Retrying+r.Retrying, total.Failed+r.Failed
		if err != nil {
			return total, err
		}
		if r.Sent+r.Retrying+r.Failed < s.cfg.BatchSize {
			break
		}
	}
	counts, err := s.d.Outbox.Count(ctx)
	if err != nil {
		return total, err
	}
	if s.d.Observer != nil {
		s.d.Observer.OutboxCounted(counts[outbox.Pending], counts[outbox.Failed])
	}
	return total, nil
}

// claimAndSend claims what c asks for under a fresh token and lease, sends the messages
// Senders at a time, and records each outcome.
func (s *Service) claimAndSend(ctx context.Context, c ports.OutboxClaim) (Round, error) {
	now := s.d.Clock.Now()
	c.Token, c.Now, c.Until = s.d.IDs.NewID(), now, now.Add(s.lease())
	claimed, err := s.d.Outbox.Claim(ctx, c)
	if err != nil {
		return Round{}, err
	}
	var (
		mu    sync.Mutex
		round Round
		g     errgroup.Group
	)
	g.SetLimit(s.cfg.Senders)
	for _, m := range claimed {
		g.Go(func() error {
			status, err := s.send(ctx, m, c.Token)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				return err
			case status == outbox.Sent:
				round.Sent++
			case status == outbox.Failed:
				round.Failed++
			default:
				round.Retrying++
			}
			return nil
		})
	}
	err = g.Wait()
	return round, err
}

// send delivers one claimed message and records the outcome while the claim holds; it returns
// the message's new status. A message that gave up is logged at error level, counted and
// alerted on.
func (s *Service) send(ctx context.Context, m outbox.Message, token string) (_ outbox.Status, err error) {
	ctx, span := s.d.Tracer.StartRoot(ctx, "outbox.deliver", ports.SpanRef(m.Origin))
	span.SetString("rushgate.outbox.message_id", m.ID)
	span.SetInt("rushgate.outbox.attempt", m.Attempts+1)
	var sendErr error
	defer func() { span.End(errors.Join(sendErr, err)) }()
	sendCtx, cancel := context.WithTimeout(ctx, s.cfg.SendTimeout)
	sendErr = s.d.Platform.Send(sendCtx, m.ID, m.Payload)
	cancel()
	if sendErr != nil && ctx.Err() != nil {
		// The relay was stopped (a shutdown) mid-send: the platform did not refuse anything, so
		// no attempt is spent, nor the last one turned into FAILED and an alert. The claim runs
		// out and the message is sent again, by the next start or another instance.
		return m.Status, nil
	}
	now := s.d.Clock.Now()
	gaveUp := false
	if sendErr == nil {
		m.MarkSent(now)
	} else {
		gaveUp = m.MarkFailed(sendErr.Error(), now, s.cfg.Backoff)
	}
	// The outcome is recorded even when ctx ended once the platform answered: the send happened.
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.SendTimeout)
	defer cancel()
	recorded, err := s.d.Outbox.Record(recordCtx, m, token)
	if err != nil || !recorded {
		return m.Status, err
	}
	if gaveUp {
		s.gaveUp(recordCtx, m)
	}
	return m.Status, nil
}

// gaveUp reports a message that will not be retried any more.
func (s *Service) gaveUp(ctx context.Context, m outbox.Message) {
	s.d.Logger.Error("outbox message FAILED after every retry", "messageId", m.ID, "attempts", m.Attempts,
		"error", m.LastError)
	if s.d.Observer != nil {
		s.d.Observer.OutboxGaveUp()
	}
	alert := ports.Alert{Summary: "outbox message " + m.ID + " FAILED after every retry", Fields: map[string]string{
		"messageId": m.ID, "attempts": strconv.Itoa(m.Attempts), "lastError": m.LastError,
	}}
	if err := s.d.Notifier.Notify(ctx, alert); err != nil {
		s.d.Logger.Error("alert not delivered", "messageId", m.ID, "error", err)
	}
}

// View is a message as operators see it; Payload is the JSON body sent to the platform.
type View struct {
	MessageID     string
	Status        string
	Attempts      int
	NextAttemptAt time.Time
	LastError     *string
	CreatedAt     time.Time
	SentAt        *time.Time
	Payload       []byte
}

func viewOf(m outbox.Message) View {
	v := View{MessageID: m.ID, Status: string(m.Status), Attempts: m.Attempts, NextAttemptAt: m.NextAttemptAt,
		CreatedAt: m.CreatedAt, SentAt: m.SentAt, Payload: m.Payload}
	if m.LastError != "" {
		v.LastError = &m.LastError
	}
	return v
}

// Page is one page of messages.
type Page struct {
	Items      []View
	NextCursor *string
}

// List pages the messages of status ("" for all) in id order; limit 0 means domain.DefaultPageLimit.
func (s *Service) List(ctx context.Context, status string, limit int, cursor string) (Page, error) {
	var st outbox.Status
	if status != "" {
		var err error
		if st, err = outbox.ParseStatus("status", status); err != nil {
			return Page{}, err
		}
	}
	limit, err := domain.PageLimit(limit)
	if err != nil {
		return Page{}, err
	}
	if cursor != "" {
		if err := domain.ValidateUUID("cursor", cursor); err != nil {
			return Page{}, err
		}
	}
	messages, next, err := s.d.Outbox.List(ports.AllowStale(ctx), st, cursor, limit)
	if err != nil {
		return Page{}, err
	}
	page := Page{Items: make([]View, len(messages))}
	for i, m := range messages {
		page.Items[i] = viewOf(m)
	}
	if next != "" {
		page.NextCursor = &next
	}
	return page, nil
}

// Retry puts a FAILED message back to PENDING with its schedule restarted and queues it for an
// immediate send. Fails with outbox.ErrNotFound or outbox.ErrNotFailed.
func (s *Service) Retry(ctx context.Context, messageID string) (View, error) {
	if err := domain.ValidateUUID("messageId", messageID); err != nil {
		return View{}, err
	}
	if err := s.d.Outbox.Retry(ctx, messageID, s.d.Clock.Now()); err != nil {
		return View{}, err
	}
	m, err := s.d.Outbox.Get(ctx, messageID)
	if err != nil {
		return View{}, err
	}
	s.SendSoon(messageID)
	return viewOf(m), nil
}
