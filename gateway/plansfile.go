package gateway

import (
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/httplimit"
)

// plansKeys are the keys of the file's plans block.
var plansKeys = []string{"tenant_header"}

// plans reads the plans block (n, nil when absent) into Config.Plans,
// whose Limits the program sets: plans: {tenant_header: X-Tenant}.
func (p *fileParser) plans(n *yaml.Node) error {
	if n == nil {
		return nil
	}
	m, err := p.fields(n, "plans", plansKeys)
	if err != nil {
		return err
	}
	h := m["tenant_header"]
	if h == nil {
		return p.errf(n, "plans needs tenant_header, the header that names the tenant")
	}
	name, err := p.str(h, "tenant_header")
	if err != nil {
		return err
	}
	if err := namedHeader(name); err != nil {
		return p.errf(h, "tenant_header: %v", err)
	}
	p.f.Config.Plans = &Plans{TenantHeader: name}
	return nil
}

// checkPlans refuses a plans block that no limit would act on: every
// route's limits are queues (without algorithm), whose meter is fixed.
func (p *fileParser) checkPlans(n *yaml.Node) error {
	if p.f.Config.Plans == nil {
		return nil
	}
	for _, rt := range p.f.Config.Routes {
		if slices.ContainsFunc(rt.Policies, func(pol httplimit.Policy) bool { return pol.Queue == nil }) {
			return nil
		}
	}
	return p.errf(n, "plans: no route has a limit with an algorithm, the only ones a tenant's plan can change (a queue's meter is fixed)")
}
