// Package notify raises operators' alerts: as an error-level log line by default, or as a JSON
// POST to a webhook.
package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/rushgate/rushgate/adapters/httppost"
	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.Notifier = Log{}
	_ ports.Notifier = (*Webhook)(nil)
)

// Log writes each alert as an error-level log line.
type Log struct{ Logger *slog.Logger }

// Notify logs the alert.
func (l Log) Notify(ctx context.Context, a ports.Alert) error {
	attrs := make([]any, 0, 2*len(a.Fields))
	for k, v := range a.Fields {
		attrs = append(attrs, k, v)
	}
	l.Logger.ErrorContext(ctx, "ALERT: "+a.Summary, attrs...)
	return nil
}

// Webhook POSTs each alert as {"summary", "fields"} to a URL; any 2xx is delivered.
type Webhook struct {
	url    string
	client *http.Client
}

// NewWebhook returns a webhook notifier whose every call is bounded by timeout.
func NewWebhook(url string, timeout time.Duration) *Webhook {
	return &Webhook{url: url, client: &http.Client{Timeout: timeout}}
}

// Notify posts the alert once.
func (w *Webhook) Notify(ctx context.Context, a ports.Alert) error {
	body, err := json.Marshal(struct {
		Summary string            `json:"summary"`
		Fields  map[string]string `json:"fields"`
	}{a.Summary, a.Fields})
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	if err := httppost.JSON(ctx, w.client, w.url, body, nil); err != nil {
		return fmt.Errorf("notify: webhook: %w", err)
	}
	return nil
}
