package waiting_test

import (
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain/waiting"
)

func TestSummarizeWaitErrors_NearestRankOfTheAbsoluteErrors(t *testing.T) {
	var errs []time.Duration
	for i := 1; i <= 10; i++ { // ±1 s … ±10 s, the sign alternating
		e := time.Duration(i) * time.Second
		if i%2 == 0 {
			e = -e
		}
		errs = append(errs, e)
	}
	got := waiting.SummarizeWaitErrors(errs)
	want := waiting.WaitAccuracy{Samples: 10, MedianErrorSeconds: 5, P90ErrorSeconds: 9}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if one := waiting.SummarizeWaitErrors([]time.Duration{-1500 * time.Millisecond}); one != (waiting.WaitAccuracy{Samples: 1, MedianErrorSeconds: 1.5, P90ErrorSeconds: 1.5}) {
		t.Fatalf("one sample: %+v", one)
	}
	if none := waiting.SummarizeWaitErrors(nil); none != (waiting.WaitAccuracy{}) {
		t.Fatalf("no sample: %+v", none)
	}
}
