package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// attempt is the outcome of one request or ceiling transaction.
type attempt struct {
	latency  time.Duration
	end      time.Duration // when it completed, counted from the start of the run
	instance int           // index of the server it was sent to; 0 for a ceiling transaction
	ok       bool          // a 201, or a committed transaction
	status   int           // HTTP status; 0 for a ceiling transaction or when err is set
	code     string        // the "error" code of a non-2xx JSON body, e.g. CREW_FULL
	err      error         // transport error, or a failed ceiling transaction
	detail   string        // start of a 5xx response body, kept as evidence
}

// work is a timed run: n units, the i-th carried out by do.
type work struct {
	n  int
	do func(ctx context.Context, i int) attempt
}

// runConcurrently calls w.do for 0..w.n-1 from concurrency workers and returns the attempts in
// call order, each stamped with its completion time, and the wall time of the whole run. It
// stops handing out work once ctx is done.
func runConcurrently(ctx context.Context, w work, concurrency int) ([]attempt, time.Duration) {
	attempts := make([]attempt, w.n)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(concurrency, w.n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= w.n {
					return
				}
				a := w.do(ctx, i)
				a.end = time.Since(start)
				attempts[i] = a // each index is written by one worker only
			}
		})
	}
	wg.Wait()
	return attempts, time.Since(start)
}
