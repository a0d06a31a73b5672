package waiting

import (
	"math"
	"slices"
	"time"
)

// WaitAccuracy summarises how far the wait estimates were off: over the absolute
// errors of Samples admissions, the median and the 90th percentile in seconds; both 0 with no
// sample.
type WaitAccuracy struct {
	Samples            int
	MedianErrorSeconds float64
	P90ErrorSeconds    float64
}

// SummarizeWaitErrors is the accuracy of the signed wait errors (actual − predicted). A
// percentile is the nearest rank: the smallest error at or above that share of the samples.
func SummarizeWaitErrors(errs []time.Duration) WaitAccuracy {
	abs := make([]float64, len(errs))
	for i, e := range errs {
		abs[i] = math.Abs(e.Seconds())
	}
	slices.Sort(abs)
	a := WaitAccuracy{Samples: len(abs)}
	if len(abs) > 0 {
		a.MedianErrorSeconds, a.P90ErrorSeconds = nearestRank(abs, 0.5), nearestRank(abs, 0.9)
	}
	return a
}

// nearestRank is the p-th percentile of sorted values by the nearest-rank method.
func nearestRank(sorted []float64, p float64) float64 {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, i)]
}
