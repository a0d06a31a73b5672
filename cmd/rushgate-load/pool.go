package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// attempt is the outcome of one join request or ceiling transaction.
type attempt struct {
	latency time.Duration
	ok      bool   // a 201 join, or a committed transaction
	status  int    // HTTP status; 0 for a ceiling transaction or when err is set
	err     error  // transport error, or a failed ceiling transaction
	detail  string // start of a 5xx response body, kept as evidence
}

// runConcurrently calls do for 0..n-1 from concurrency workers and returns the attempts in call
// order and the wall time of the whole run. It stops handing out work once ctx is done.
func runConcurrently(ctx context.Context, n, concurrency int, do func(ctx context.Context, i int) attempt) ([]attempt, time.Duration) {
	attempts := make([]attempt, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(concurrency, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				attempts[i] = do(ctx, i) // each index is written by one worker only
			}
		})
	}
	wg.Wait()
	return attempts, time.Since(start)
}
