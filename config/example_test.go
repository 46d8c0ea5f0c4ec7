package config_test

import (
	"fmt"
	"os"

	"github.com/sluicehq/sluice/config"
)

func Example() {
	d, err := config.Parse("edge.yaml", []byte(`
domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 20
  - key: remote_address
    value: 203.0.113.9
    rate_limit:
      unit: second
      requests_per_unit: 0
  - key: path
    value: /api/*
    rate_limit:
      algorithm: token_bucket
      unit: minute
      requests_per_unit: 600
      burst: 50
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg, err := config.New(d)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg.Dump(os.Stdout)

	r := cfg.Lookup("edge", []config.Entry{{Key: "path", Value: "/api/orders"}})
	fmt.Println(r.FullKey, "→", r.Limit)
	r = cfg.Lookup("edge", []config.Entry{{Key: "remote_address", Value: "203.0.113.9"}})
	fmt.Println(r.FullKey, "blocks all:", r.BlocksAll())
	fmt.Println(cfg.Lookup("edge", []config.Entry{{Key: "user", Value: "ann"}}))
	// Output:
	// domain edge (edge.yaml)
	//   remote_address: fixed_window 20/1s
	//   remote_address=203.0.113.9: blocked (0 per second)
	//   path=/api/*: token_bucket 600/1m0s burst 50
	// edge.path_/api/* → token_bucket 600/1m0s burst 50
	// edge.remote_address_203.0.113.9 blocks all: true
	// <nil>
}

func ExampleParse_error() {
	_, err := config.Parse("ratelimit.yaml", []byte(`domain: typo
descriptors:
  - key: user
    rate_limit:
      unit: second
      requets_per_unit: 5
`))
	fmt.Println(err)
	// Output:
	// ratelimit.yaml:6:7: config: unknown key "requets_per_unit" in rate_limit (did you mean "requests_per_unit"?)
}

func ExampleConfig_ForwardAuth() {
	d, err := config.Parse("edge.yaml", []byte(`domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 60}
  - key: method
    descriptors:
      - key: path
        value: /login
        rate_limit: {unit: minute, requests_per_unit: 5}
forward_auth:                  # Sluice: what /auth asks about
  trusted_proxies: [10.0.0.0/8]
  descriptors:
    - entries:
        - {key: remote_address, from: client_ip}
    - entries:
        - {key: method, from: method}
        - {key: path, from: path}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg, err := config.New(d)
	if err != nil {
		fmt.Println(err)
		return
	}
	fa := cfg.ForwardAuth()
	fmt.Println(fa.Domain, fa.TrustedProxies, len(fa.Descriptors), "descriptors")
	for _, e := range fa.Descriptors[1].Entries {
		fmt.Printf("%s from %v (line %d)\n", e.Key, e.From, e.Line)
	}
	// Output:
	// edge [10.0.0.0/8] 2 descriptors
	// method from method (line 16)
	// path from path (line 17)
}
