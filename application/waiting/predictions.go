package waiting

import "sync"

// maxPredictions bounds the users one event's set remembers.
const maxPredictions = 100_000

// predictions are, per event, the users whose first wait estimate this instance sent to the
// store. Forgetting one costs only a repeated write on the user's next poll (the store keeps
// the first estimate of any instance), so the sets stay bounded: a user is forgotten once
// admitted or gone from the queue, an event once it sells out or its room is no longer in use,
// and an event's set that reaches maxPredictions starts afresh.
type predictions struct {
	mu      sync.Mutex
	byEvent map[string]map[string]struct{}
}

func newPredictions() *predictions {
	return &predictions{byEvent: make(map[string]map[string]struct{})}
}

// add remembers the user, reporting whether they were new.
func (p *predictions) add(eventID, userID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	users := p.byEvent[eventID]
	if _, ok := users[userID]; ok {
		return false
	}
	if users == nil || len(users) >= maxPredictions {
		users = make(map[string]struct{})
		p.byEvent[eventID] = users
	}
	users[userID] = struct{}{}
	return true
}

func (p *predictions) forget(eventID, userID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.byEvent[eventID], userID)
}

func (p *predictions) forgetEvent(eventID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.byEvent, eventID)
}

// keepOnly forgets every event but inUse.
func (p *predictions) keepOnly(inUse []string) {
	keep := make(map[string]struct{}, len(inUse))
	for _, id := range inUse {
		keep[id] = struct{}{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.byEvent {
		if _, ok := keep[id]; !ok {
			delete(p.byEvent, id)
		}
	}
}

// size is how many users are remembered across events.
func (p *predictions) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, users := range p.byEvent {
		n += len(users)
	}
	return n
}
