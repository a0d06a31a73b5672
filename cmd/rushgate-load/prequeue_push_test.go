package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// At one tick every waiting user's place − rank is the number admitted ahead of them; a stream
// whose difference is not its tick's is out of the line.
func TestLineBreaks_CountsTheFirstPositionsOutOfTheLine(t *testing.T) {
	t.Parallel()
	t1, t2 := time.UnixMilli(1000), time.UnixMilli(2000)
	inLine := []firstPosition{
		{place: 3, tick: t1, rank: 0}, {place: 4, tick: t1, rank: 1}, {place: 5, tick: t1, rank: 2},
		{place: 9, tick: t2, rank: 1}, {place: 10, tick: t2, rank: 2}, // a later tick, more admitted ahead
	}
	assert.Zero(t, lineBreaks(inLine))
	assert.Zero(t, lineBreaks(nil))

	swapped := append([]firstPosition{}, inLine...)
	swapped[0].rank, swapped[1].rank = 1, 0
	assert.Equal(t, 2, lineBreaks(swapped), "two users in each other's place")

	otherBroker := append([]firstPosition{}, inLine...)
	otherBroker[4] = firstPosition{place: 10, broker: 1, tick: t2, rank: 0}
	assert.Zero(t, lineBreaks(otherBroker), "another broker's snapshot at the same instant is its own")
}

// Promotions follow the line when nobody is promoted before someone ahead of them; users
// promoted together (the same id) keep the order.
func TestAdmissionInversions_CountsPromotionsAheadOfTheirTurn(t *testing.T) {
	t.Parallel()
	ms := time.UnixMilli
	assert.Zero(t, admissionInversions([]time.Time{ms(1), ms(1), ms(2), {}, ms(3)}), "ties and a user never admitted")
	assert.Equal(t, 1, admissionInversions([]time.Time{ms(1), ms(5), ms(2), ms(6)}), "the third was promoted before the second")
	assert.Equal(t, 2, admissionInversions([]time.Time{ms(9), ms(1), ms(2)}), "the first was promoted last")
}

func TestPrequeueOpenPush_IsSizedForOneClientsFileLimit(t *testing.T) {
	t.Parallel()
	r, err := lookup("prequeue-open-push")
	if assert.NoError(t, err) {
		assert.Equal(t, flagValues{"users": "18000", "capacity": "100", "concurrency": "128"}, r.defaults)
	}
	_, err = newPrequeueOpenPush(config{users: 10, capacity: 0})
	assert.ErrorContains(t, err, "--capacity (the slots) must be 1..")
}
