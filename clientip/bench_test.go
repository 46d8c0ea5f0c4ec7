package clientip_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/clientip"
)

func BenchmarkClientIP(b *testing.B) {
	trusted, err := clientip.ParsePrefixes("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fd00::/8")
	if err != nil {
		b.Fatal(err)
	}
	long := strings.Repeat("192.0.2.1, ", 50) + "198.51.100.7, 10.0.0.1"
	cases := []struct {
		name   string
		header clientip.Header
		peer   string
		value  string
	}{
		{"untrusted-peer", clientip.XForwardedFor, "203.0.113.9:41000", "198.51.100.7"},
		{"xff/entries=1", clientip.XForwardedFor, "10.0.0.2:41000", "198.51.100.7"},
		{"xff/entries=3", clientip.XForwardedFor, "10.0.0.2:41000", "203.0.113.9, 198.51.100.7, 10.0.0.1"},
		{"xff/entries=3/ipv6", clientip.XForwardedFor, "[fd00::2]:41000", "2001:db8::9, 2001:db8:cafe::17, fd00::1"},
		{"xff/entries=52", clientip.XForwardedFor, "10.0.0.2:41000", long},
		{"forwarded/elements=2", clientip.Forwarded, "10.0.0.2:41000", `for=192.0.2.43;proto=https, for="[2001:db8:cafe::17]:4711"`},
		{"forwarded/elements=52", clientip.Forwarded, "10.0.0.2:41000", "for=" + strings.ReplaceAll(long, ", ", ", for=")},
	}
	for _, c := range cases {
		r := &clientip.Resolver{TrustedProxies: trusted, Header: c.header}
		req := &http.Request{RemoteAddr: c.peer, Header: http.Header{}}
		req.Header.Set(c.header.String(), c.value)
		if _, err := r.ClientIP(req); err != nil {
			b.Fatal(err)
		}
		b.Run("ClientIP/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.ClientIP(req)
			}
		})
		b.Run("Key/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Key(req)
			}
		})
	}
}
