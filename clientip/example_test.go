package clientip_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/sluicehq/sluice/clientip"
)

func Example() {
	trusted, err := clientip.ParsePrefixes("10.0.0.0/8")
	if err != nil {
		log.Fatal(err)
	}
	r := &clientip.Resolver{TrustedProxies: trusted}

	// Behind our load balancer (10.0.0.2): the rightmost address it did
	// not add itself. What the client wrote on the left is ignored.
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "10.0.0.2:41000"
	req.Header.Set("X-Forwarded-For", "203.0.113.9, 198.51.100.7, 10.0.0.1")
	fmt.Println(r.ClientIP(req))

	// Straight from the internet: the header is not believed.
	req.RemoteAddr = "192.0.2.1:41000"
	fmt.Println(r.ClientIP(req))

	// IPv6 clients are keyed by their /64.
	req.RemoteAddr = "[2001:db8:cafe:1:aaaa:bbbb:cccc:dddd]:41000"
	fmt.Println(r.Key(req))
	// Output:
	// 198.51.100.7 <nil>
	// 192.0.2.1 <nil>
	// 2001:db8:cafe:1::/64 <nil>
}

func ExampleResolver_forwarded() {
	trusted, err := clientip.ParsePrefixes("10.0.0.0/8")
	if err != nil {
		panic(err)
	}
	r := &clientip.Resolver{TrustedProxies: trusted, Header: clientip.Forwarded, IPv6Prefix: 128}

	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "10.0.0.2:41000"
	req.Header.Set("Forwarded", `for=192.0.2.43, for="[2001:db8:cafe::17]:4711"`)
	fmt.Println(r.Key(req))

	// A proxy that hides its client: the limiter keys on the proxy, never
	// on "_hidden".
	req.Header.Set("Forwarded", "for=_hidden")
	fmt.Println(r.Key(req))
	// Output:
	// 2001:db8:cafe::17 <nil>
	// 10.0.0.2 <nil>
}
