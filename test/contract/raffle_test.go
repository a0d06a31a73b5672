package contract_test

import (
	"testing"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/ports/porttest"
	"github.com/rushgate/rushgate/test/testenv"
)

// TestRaffleRepositories runs the raffle suite on memory, Postgres and MySQL: on a database,
// every caller gets a pool of its own to one fresh database, as separate instances have.
func TestRaffleRepositories(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		db := memory.NewDatabase()
		backend := porttest.RaffleBackend{Tx: db, RaffleStores: memory.NewRaffleStores(db)}
		porttest.TestRaffleRepositories(t, func(*testing.T) porttest.RaffleBackend { return backend }, porttest.Capabilities{})
	})
	for name, fresh := range map[string]func(testing.TB) testenv.Database{"postgres": testenv.Postgres, "mysql": testenv.MySQL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			database := fresh(t)
			porttest.TestRaffleRepositories(t, func(t *testing.T) porttest.RaffleBackend {
				opts := testenv.DBOptions()
				opts.TxTimeout = contractTxTimeout
				db := openSQL(t, database, opts)
				return porttest.RaffleBackend{Tx: gormdb.NewTxRunner(db), RaffleStores: gormdb.NewRaffleStores(db)}
			}, porttest.Capabilities{})
		})
	}
}
