package projector

import (
	"slices"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// A tenant's sessions are the ids _T<tenant>_<id> (ADR 010); what a
// tenant's token sees is the HTTP side's rule (httpapi.Sees), and the
// fold indexes each session under the agents that rule lets see it
// (readers).

// readers are the agents whose tokens see the session stored as id by
// its summary sum (httpapi.Sees): its owner and the agents it grants, sorted,
// each once, when the owner is of the tenant the id names; none for a
// session without an owner. The fold indexes the session under each
// (store.AgentActivityPrefix), which the list of a token of agents reads.
func readers(id string, sum *store.Summary) []string {
	tenant := api.TenantOf(id)
	if tenant == "" || sum.Owner == nil || sum.Owner.Tenant != tenant {
		return nil
	}
	agents := append(make([]string, 0, 1+len(sum.Grants)), sum.Owner.Agent)
	agents = append(agents, sum.Grants...)
	slices.Sort(agents)
	return slices.Compact(agents)
}
