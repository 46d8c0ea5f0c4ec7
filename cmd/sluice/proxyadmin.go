package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/admin"
	"github.com/sluicehq/sluice/admin/page"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/stores"
	"github.com/sluicehq/sluice/service"
)

// proxyPage is the proxy's live page and admin API, on its admin
// listener behind the admin authentication (serve's flags: a token or a
// client certificate); off (page nil) without a token or client CA, when
// the admin listener serves /metrics and /healthcheck only, as before.
type proxyPage struct {
	page   *page.Page
	api    *admin.API
	loaded daemon.PageConfig
}

// openPage makes the live page and the admin API when the admin listener
// is on and has a token or a client CA; it refuses the admin flags that
// would not be acted on.
func (p *proxyApp) openPage(ctx context.Context) error {
	o := &p.o.admin
	if p.o.adminAddr == "" {
		return o.CheckOff(p.o.fs)
	}
	if err := o.Check(); err != nil {
		return err
	}
	cfg, ok, err := o.APIAuth(ctx)
	if err != nil {
		return err
	}
	if !ok {
		for _, name := range []string{"admin-raw-keys", "admin-login-link"} {
			if envflag.IsSet(p.o.fs, name) {
				return daemon.ExitCode(2, "-"+name+" needs the page, which needs a token (-admin-token-file or "+daemon.AdminTokenEnv+") or -admin-client-ca")
			}
		}
		return nil
	}
	cfg.Limiter, cfg.Logger = p.limiter, p.log.With("log", "audit")
	p.pg.page = page.New(page.Config{
		RawKeys:   o.RawKeys,
		KeySecret: p.logKeySecret, // the page's hash of a key is the logs'
		Decider:   proxyDecider{p},
		Config:    func() page.LoadedConfig { return p.pg.loaded.Running("") },
		Store:     p.storeState,
	})
	cfg.Keys, cfg.KeyHash, cfg.SessionPaths = proxyKeys{p}, p.pg.page.KeyHash, page.Path
	p.pg.api = admin.New(cfg)
	p.pg.page.Mount(p.pg.api)
	p.configLoaded()
	return nil
}

// configLoaded records the running config's source and load time for
// the live page.
func (p *proxyApp) configLoaded() {
	if p.pg.page == nil {
		return
	}
	src := p.o.configPath
	if src == "" {
		src = "-upstream " + p.o.upstream
	}
	p.pg.loaded.Loaded(nil, src)
}

// observer is the gateway's Observer: the live page's, or nil.
func (p *proxyApp) observer() httplimit.Observer {
	if p.pg.page == nil {
		return nil
	}
	return proxyObserver{p.pg.page}
}

// adminHandler is the admin listener's handler: /metrics and /healthcheck
// open to all (Prometheus and probes), the rest (the page and the admin
// API) behind the admin authentication when the page is on.
func (p *proxyApp) adminHandler(mux *http.ServeMux) http.Handler {
	if p.pg.api != nil {
		mux.Handle("/", p.pg.api)
	}
	return mux
}

// storeState is the store's state for the live page: with Redis, its
// breaker (Connected says the breaker is closed: the proxy does not
// track a first answer).
func (p *proxyApp) storeState() page.StoreState {
	f, ok := p.limiter.(*failsafe.Limiter)
	if !ok {
		return daemon.StoreState(stores.Name(p.o.store), true, nil)
	}
	b := &daemon.Breaker{Mode: f.Mode().String(), Available: f.Available(), OpenPartitions: f.OpenPartitions()}
	return daemon.StoreState(stores.Name(p.o.store), b.Available, b)
}

// proxyKeys is the proxy's admin.KeyResolver: the domain names a rate
// limit of the config, the one entry's value is what its key function
// returns for a request (a client IP, a header's value), as the live
// page's form takes them.
type proxyKeys struct{ p *proxyApp }

// CountedKeys returns the store key and limit of the limit the domain
// names for the entry's value.
func (k proxyKeys) CountedKeys(ctx context.Context, domain string, es []admin.DescriptorEntry) ([]admin.CountedKey, error) {
	if len(es) != 1 {
		return nil, fmt.Errorf("%w: on the proxy, give one entry, key=VALUE, VALUE what the limit's key is for a request (such as a client IP)", sluice.ErrBadInput)
	}
	if k.p.gw == nil {
		return nil, errors.New("the proxy is not running yet")
	}
	ps, err := k.p.gw.Peek(ctx, domain, es[0].Value)
	if errors.Is(err, gateway.ErrNoPolicy) {
		return nil, fmt.Errorf("%w: %w (the proxy's -domain is a limit's name)", admin.ErrNoRule, err)
	}
	if err != nil {
		return nil, err
	}
	return []admin.CountedKey{{Rule: ps.Policy, Key: ps.Key, Limit: ps.Limit}}, nil
}

// proxyObserver hands the proxy's decisions to the live page: a policy
// is a rule of domain "proxy".
type proxyObserver struct{ p *page.Page }

// Observe shows d on the live page as a decision of domain "proxy".
func (o proxyObserver) Observe(d httplimit.Decision) {
	o.p.Observe(service.Decision{Domain: "proxy", Rule: d.Policy, Outcome: d.Outcome, Cost: uint64(d.Cost), Key: d.Key})
}

// proxyDecider answers the live page's form from the proxy's limiter:
// the domain names a rate policy, the one entry's value is the key its
// key function would return (a client IP, a header's value); the key's
// state is read without spending (gateway.Peek).
type proxyDecider struct{ p *proxyApp }

// ShouldRateLimit reads the state of the one entry's key under the
// policy the domain names, without spending.
func (d proxyDecider) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	ds := req.GetDescriptors()
	if len(ds) != 1 || len(ds[0].GetEntries()) != 1 {
		return nil, errors.New("on the proxy, give one entry: key=VALUE, the value of the policy's key (such as a client IP)")
	}
	ps, err := d.p.gw.Peek(ctx, req.GetDomain(), ds[0].GetEntries()[0].GetValue())
	if errors.Is(err, gateway.ErrNoPolicy) {
		return &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OK, Statuses: []*pb.RateLimitResponse_DescriptorStatus{{Code: pb.RateLimitResponse_OK}}}, nil
	}
	if err != nil {
		return nil, err
	}
	return peekResponse(ps), nil
}

// peekResponse is a policy's state as a rate limit response: OVER_LIMIT
// when the key is over its limit, the limit named by the policy and its
// full description.
func peekResponse(ps gateway.PolicyState) *pb.RateLimitResponse {
	code := pb.RateLimitResponse_OK
	reset := ps.Result.ResetAfter
	if !ps.Result.Allowed {
		code, reset = pb.RateLimitResponse_OVER_LIMIT, ps.Result.RetryAfter
	}
	st := &pb.RateLimitResponse_DescriptorStatus{
		Code: code,
		CurrentLimit: &pb.RateLimitResponse_RateLimit{
			Name:            ps.Policy + ": " + ps.Limit.String(),
			RequestsPerUnit: uint32(min(ps.Limit.Rate, 1<<32-1)),
			Unit:            unitOf(ps.Limit.Period),
		},
		LimitRemaining:     uint32(min(max(ps.Result.Remaining, 0), 1<<32-1)),
		DurationUntilReset: durationpb.New(reset),
	}
	return &pb.RateLimitResponse{OverallCode: code, Statuses: []*pb.RateLimitResponse_DescriptorStatus{st}}
}

// unitOf is the rate limit unit of a period, UNKNOWN when it is none of
// them (the limit's name then says it).
func unitOf(p time.Duration) pb.RateLimitResponse_RateLimit_Unit {
	switch p {
	case time.Second:
		return pb.RateLimitResponse_RateLimit_SECOND
	case time.Minute:
		return pb.RateLimitResponse_RateLimit_MINUTE
	case time.Hour:
		return pb.RateLimitResponse_RateLimit_HOUR
	case 24 * time.Hour:
		return pb.RateLimitResponse_RateLimit_DAY
	}
	return pb.RateLimitResponse_RateLimit_UNKNOWN
}
