package contract_test

import (
	"testing"

	"github.com/rushgate/rushgate/ports/porttest"
)

func TestCrewRepositories(t *testing.T) {
	t.Parallel()
	runOnBackends(t, storesOf, porttest.TestCrewRepositories)
}

func TestTxRunner(t *testing.T) {
	t.Parallel()
	runOnBackends(t, storesOf, porttest.TestTxRunner)
}

func TestIdempotencyMarkers(t *testing.T) {
	t.Parallel()
	runOnBackends(t, storesOf, porttest.TestIdempotencyMarkers)
}

func TestLocker(t *testing.T) {
	t.Parallel()
	runOnBackends(t, lockerOf, porttest.TestLocker)
}

func TestIdempotencyStore(t *testing.T) {
	t.Parallel()
	runOnBackends(t, idempotencyOf, porttest.TestIdempotencyStore)
}

func TestCouponRepositories(t *testing.T) {
	t.Parallel()
	runOnBackends(t, storesOf, porttest.TestCouponRepositories)
}

func TestWalletRepository(t *testing.T) {
	t.Parallel()
	runOnBackends(t, storesOf, porttest.TestWalletRepository)
}

func TestCommerceRepositories(t *testing.T) {
	t.Parallel()
	runOnBackends(t, storesOf, porttest.TestCommerceRepositories)
}

func TestChallengeRepositories(t *testing.T) {
	t.Parallel()
	runOnBackends(t, storesOf, porttest.TestChallengeRepositories)
}

func TestWaitingRoom(t *testing.T) {
	t.Parallel()
	runOnBackends(t, waitingRoomOf, porttest.TestWaitingRoom)
}

func TestPushQueue(t *testing.T) {
	t.Parallel()
	runOnBackends(t, pushQueueOf, porttest.TestPushQueue)
}

func TestSoldOut(t *testing.T) {
	t.Parallel()
	runOnBackends(t, pushQueueOf, porttest.TestSoldOut)
}

func TestEventRepositories(t *testing.T) {
	t.Parallel()
	runOnBackends(t, storesOf, porttest.TestEventRepositories)
}

func TestPaymentRepositories(t *testing.T) {
	t.Parallel()
	runOnBackends(t, storesOf, porttest.TestPaymentRepositories)
}

func TestPrequeueRoom(t *testing.T) {
	t.Parallel()
	runOnBackends(t, pushQueueOf, porttest.TestPrequeueRoom)
}

func TestWaitPredictor(t *testing.T) {
	t.Parallel()
	runOnBackends(t, pushQueueOf, porttest.TestWaitPredictor)
}
