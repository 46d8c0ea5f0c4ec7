package gateway_test

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/gateway"
)

// ParseFile never panics, and every error it returns is a *config.Error.
func FuzzParseFile(f *testing.F) {
	for _, s := range []string{
		"upstream: http://u\nlimits:\n  - {name: a, key: ip, rate: 1r/s, burst: 5, nodelay: true}\nroutes:\n  - {name: r, match: /, limits: [a]}\n",
		"upstreams:\n  - {name: a, url: \"http://x\", max_in_flight: 3}\nconns: [{name: c, key: [ip, route], max: 2}]\nroutes: [{name: r, match: [\"GET /a/{id}\", \"h.example/b/\"], conns: [c], upstream: a}]\n",
		"status: 503\nheaders: both\ntrusted_proxies: [10.0.0.0/8]\nupstream_timeout: 1s\n",
		"a: &x {b: 1}\nc: *x\n",
		"routes: [{name: r, match: \"GET /{\"}]",
		"client_body_timeout: 5s\nsend_timeout: 1m\nkeepalive_timeout: 75s\nclient_header_timeout: 60s\nlog_keys: true\nhash_keys: true\n",
		"limits: [{name: a, key: ip, rate: 1r/s, burst: 5}]\nroutes: [{name: r, match: /l, methods: [POST, GET], limits: [{name: a, burst: 2, delay: 1}, {name: a}]}]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := gateway.ParseFile("f.yaml", data)
		if err == nil {
			return
		}
		var ce *config.Error
		if !errors.As(err, &ce) {
			t.Fatalf("error %T %v is not a *config.Error", err, err)
		}
	})
}
