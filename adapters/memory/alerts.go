package memory

import (
	"context"
	"slices"
	"sync"

	"github.com/rushgate/rushgate/ports"
)

var _ ports.Notifier = (*Alerts)(nil)

// Alerts is a ports.Notifier that keeps the alerts it is sent, in order, for whoever reads them
// (a test, or an embedder with its own way of paging). It is safe for concurrent use.
type Alerts struct {
	mu     sync.Mutex
	raised []ports.Alert
}

// Notify keeps a.
func (a *Alerts) Notify(_ context.Context, alert ports.Alert) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.raised = append(a.raised, alert)
	return nil
}

// Raised returns the alerts kept so far.
func (a *Alerts) Raised() []ports.Alert {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.raised)
}
