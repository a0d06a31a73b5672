package bootstrap

import (
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
	}, crew.Config{MaxBatch: cfg.Guard.LockMaxBatch})
}
