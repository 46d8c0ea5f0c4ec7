package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testlog"
)

// With AccessLogJSON a refusal is one JSON object on one line, whatever
// the client puts in its fields: a quote, a brace or bytes that are not
// UTF-8 in the User-Agent cannot break the object or forge another.
func TestAccessLogJSONIsOneObjectPerRefusal(t *testing.T) {
	up := newUpstream(t)
	cfg := parsed(t, secretKeyConfig, up)
	var access testlog.Buffer
	cfg.AccessLog = &access
	cfg.AccessLogJSON = true
	_, srv := front(t, cfg)
	const agent = "evil\"},{\"status\":200 \xff<x>"
	for i, want := range []int{200, 429} {
		if code := getHeaders(t, srv.Client(), srv.URL+"/x?a=1", "X-Api-Key", "sk_live_SECRET", "User-Agent", agent).StatusCode; code != want {
			t.Fatalf("request %d: %d, want %d", i+1, code, want)
		}
	}
	out := access.String()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("want one line, got %q", out)
	}
	var line struct {
		Timestamp string   `json:"@timestamp"`
		Message   string   `json:"@message"`
		Addr      string   `json:"remote_addr"`
		Method    string   `json:"request_method"`
		URI       string   `json:"request_uri"`
		Proto     string   `json:"server_protocol"`
		Status    int      `json:"status"`
		Bytes     *int     `json:"body_bytes_sent"`
		Referer   string   `json:"http_referer"`
		Agent     string   `json:"http_user_agent"`
		Outcome   string   `json:"outcome"`
		By        []string `json:"by"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&line); err != nil {
		t.Fatalf("not one JSON object of the documented keys: %v\n%s", err, out)
	}
	if line.Message != "access" || line.Method != "GET" || line.URI != "/x?a=1" || line.Status != 429 ||
		line.Bytes == nil || *line.Bytes <= 0 || line.Outcome != "REJECTED" || len(line.By) != 1 || line.By[0] != "by_key" ||
		line.Timestamp == "" || line.Addr == "" {
		t.Errorf("fields %+v from %s", line, out)
	}
	if want := "evil\"},{\"status\":200 \ufffd<x>"; line.Agent != want {
		t.Errorf("user agent %q, want %q", line.Agent, want)
	}
	if strings.Contains(out, "sk_live_SECRET") {
		t.Errorf("the key reached the access log: %s", out)
	}
}
