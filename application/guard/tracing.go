package guard

import "github.com/rushgate/rushgate/ports"

// The guard's spans (with WithTracer), children of the request's span unless named otherwise.
const (
	spanBegin       = "guard.idempotency.begin"    // taking the Idempotency-Key
	spanLaneWait    = "guard.lane.wait"            // queued behind the key's head until leading or served
	spanLockAcquire = "guard.lock.acquire"         // the head's attempts at the distributed lock
	spanBatch       = "guard.batch"                // the batch's transaction(s), under the head, linked to the rest
	spanMarkersSave = "guard.markers.save"         // the batch's idempotency markers, in its transaction
	spanComplete    = "guard.idempotency.complete" // storing the answer for replays
)

// Span attributes.
const (
	attrQueueLength  = "rushgate.lane.queue_length"
	attrLockKey      = "rushgate.lock.key"
	attrLockAttempts = "rushgate.lock.attempts"
	attrBatchSize    = "rushgate.batch.size"
	attrMarkers      = "rushgate.markers"
)

// servedLinks names the requests a batch served besides its leader: the batch span, a child
// of the leader's request, links to each of them rather than posing as their child.
func servedLinks[In, Out any](others []*waiter[In, Out]) []ports.SpanRef {
	refs := make([]ports.SpanRef, 0, len(others))
	for _, w := range others {
		if w.ref != "" {
			refs = append(refs, w.ref)
		}
	}
	return refs
}

func endLockSpan(span ports.Span, lockKey string, attempts int, err error) {
	span.SetString(attrLockKey, lockKey)
	span.SetInt(attrLockAttempts, attempts)
	span.End(err)
}
