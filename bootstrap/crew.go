package bootstrap

import (
	"runtime"

	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/application/crew"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/ports"
)

// CrewModule is the crews: their store set, use cases and routes.
var CrewModule = flow("crew",
	fx.Provide(storesOn(memory.NewCrewStores, gormdb.NewCrewStores), provideCrewService),
	routes(rghttp.CrewRoutes),
)

func provideCrewService(cfg Config, tx ports.TxRunner, stores ports.CrewStores, g *guard.Guard, clock ports.Clock,
	ids ports.IDGenerator) *crew.Service {
	return crew.NewService(crew.Deps{
		Tx:      tx,
		Crews:   stores.Crews,
		Members: stores.CrewMembers,
		Guard:   g,
		Clock:   clock,
		IDs:     ids,
	}, crew.Config{MaxBatch: cfg.Guard.LockMaxBatch, SharedTransactions: crewSharedTransactions(runtime.GOMAXPROCS(0))})
}

// crewSharedTransactions is how many shared crew transactions a process with procs cores' worth
// of threads (GOMAXPROCS: a container's CPU limit, or the machine's cores) keeps out at once:
// one on a single core, crew.DefaultSharedTransactions otherwise. Two instances of one core each
// on two cores ran 7–8% more uncontended joins on MariaDB with one (five of six alternating
// crew-spread pairs; the sixth even) and about 4% more on Postgres, at lower CPU per join: each
// serves half the crowd, and a second transaction out split it into smaller batches.
func crewSharedTransactions(procs int) int { return min(procs, crew.DefaultSharedTransactions) }
