package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSoldOut_NeedsMoreUsersThanSeats(t *testing.T) {
	t.Parallel()
	_, err := newSoldOut(config{users: 100, capacity: 100, queueTick: time.Second})
	assert.ErrorContains(t, err, "must exceed --capacity")
	sc, err := newSoldOut(config{users: 10000, capacity: 100, queueTick: time.Second})
	require.NoError(t, err)
	assert.Equal(t, "10000 users → 1 pull event of 100 seats, sold out", sc.shape())
}

// A sale that went right: every seat sold, every waiting user told, no admission after the last
// seat, the room's promotions unchanged since.
func goodSale(at time.Time) saleRecord {
	return saleRecord{
		seats: 2, reserved: 2, soldOutAt: at,
		toldAt:          []time.Time{at.Add(-time.Millisecond), at.Add(300 * time.Millisecond), at.Add(1500 * time.Millisecond)},
		admittedSent:    []time.Time{at.Add(-time.Second), at.Add(-time.Millisecond)},
		claimsAtSoldOut: 2, claimsAtEnd: 2, claimsAnswered: 2,
	}
}

func TestSaleRecord_TimesToTellCountFromTheLastSeatAndAnAnswerThatBeatItIsAtOnce(t *testing.T) {
	t.Parallel()
	at := time.Unix(1000, 0)
	r := goodSale(at)
	assert.Equal(t, []time.Duration{0, 300 * time.Millisecond, 1500 * time.Millisecond}, r.timesToTell())
	assert.Empty(t, r.problems())

	r.toldAt = append(r.toldAt, time.Time{})
	assert.Len(t, r.timesToTell(), 3, "a user never told has no time to tell")
}

func TestSaleRecord_ProblemsNameEachBrokenRule(t *testing.T) {
	t.Parallel()
	at := time.Unix(1000, 0)
	for name, c := range map[string]struct {
		change func(*saleRecord)
		want   string
	}{
		"never sold out":     {func(r *saleRecord) { r.soldOutAt, r.reserved = time.Time{}, 1 }, "never sold out: 1 of 2 seats reserved"},
		"oversold":           {func(r *saleRecord) { r.reserved = 3 }, "3 reservations answered 201 for 2 seats"},
		"a user not told":    {func(r *saleRecord) { r.toldAt[1] = time.Time{} }, "1 of 3 waiting users were never told sold out"},
		"a late admission":   {func(r *saleRecord) { r.admittedSent[1] = at.Add(time.Millisecond) }, "1 admissions after the sold-out moment (a claim sent, or a promotion, after it)"},
		"a late promotion":   {func(r *saleRecord) { r.claimsAtEnd = 3 }, "the room counted 2 promotions at the sold-out moment and 3 after the sale"},
		"a hidden admission": {func(r *saleRecord) { r.claimsAnswered = 1 }, "the room counts 2 promotions, the claims answered 201 are 1"},
	} {
		r := goodSale(at)
		c.change(&r)
		assert.Contains(t, r.problems(), c.want, name)
	}
}

func TestTellVerdict_JudgesTheLastUserToldAgainstTwoTicks(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "", tellVerdict(nil, time.Second), "nobody to tell, nothing judged")
	assert.Equal(t, "2000 ms (target ≤ two queue ticks, 2s: PASS)", tellVerdict([]time.Duration{time.Millisecond, 2 * time.Second}, time.Second))
	assert.Equal(t, "2001 ms (target ≤ two queue ticks, 2s: MISS)", tellVerdict([]time.Duration{2001 * time.Millisecond}, time.Second))
	assert.Equal(t, "600 ms (target ≤ two queue ticks, 500ms: MISS)", tellVerdict([]time.Duration{600 * time.Millisecond}, 250*time.Millisecond), "the servers' tick")
}
