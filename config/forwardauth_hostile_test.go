package config

import (
	"fmt"
	"strings"
	"testing"
)

// A header source that net/http never leaves in a request's headers
// (Host becomes Request.Host, Transfer-Encoding Request.TransferEncoding)
// would find no value on every request, so that its descriptor is always
// left out and its limit never applies: such a section is refused with
// its line, naming what to write instead. Before, `header: Host` loaded
// and sluice check printed it.
func TestForwardAuthHeaderThatIsNeverThereIsRefused(t *testing.T) {
	const cfg = "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n" +
		"forward_auth:\n  descriptors:\n    - entries: [{key: k, from: header, header: %s}]\n"
	for _, h := range []string{"Host", "host", "Transfer-Encoding"} {
		_, err := Parse("edge.yaml", fmt.Appendf(nil, cfg, h))
		if err == nil || !strings.Contains(err.Error(), "edge.yaml:7") {
			t.Errorf("header: %s: %v, want an error at edge.yaml:7", h, err)
		}
	}
	if _, err := Parse("edge.yaml", fmt.Appendf(nil, cfg, "host")); err == nil || !strings.Contains(err.Error(), "from: host") {
		t.Errorf("header: host: %v, want it to name from: host", err)
	}
	if _, err := Parse("edge.yaml", fmt.Appendf(nil, cfg, "X-Tenant")); err != nil {
		t.Errorf("header: X-Tenant: %v", err)
	}
}
