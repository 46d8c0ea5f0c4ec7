package ratelimitenv

import (
	"slices"
	"strings"
	"testing"
)

// The table says each variable once, and says enough of each: the value
// of an OnlyValue row, the decider of a Decided one.
func TestTableNamesEachVariableOnceAndWhole(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range Vars {
		if seen[v.Name] {
			t.Errorf("%s: twice in the table", v.Name)
		}
		seen[v.Name] = true
		if (v.Acted == OnlyValue) != (v.Value != "") {
			t.Errorf("%s: Value %q with Acted %d; want a value exactly for OnlyValue", v.Name, v.Value, v.Acted)
		}
		if (v.Acted == Decided) != (v.DecidedBy != "") {
			t.Errorf("%s: DecidedBy %q with Acted %d; want a decider exactly for Decided", v.Name, v.DecidedBy, v.Acted)
		}
	}
}

// The start-up line's list: the set variables never acted on by name,
// then those acted on with one value only that have another, with it,
// each kind in table order; an acted-on value (any spelling of the same
// boolean) and the Decided variables are not named.
func TestNotActedOnNamesNeverThenOtherValues(t *testing.T) {
	for _, v := range Vars {
		unsetenv(t, v.Name)
	}
	t.Setenv("BACKEND_TYPE", "memcache")
	t.Setenv("PROMETHEUS_ADDR", ":9090")
	t.Setenv("DISABLE_STATS", "FALSE")
	t.Setenv("MEMCACHE_SRV", "")
	t.Setenv("REDIS_POOL_SIZE", "8")
	if got, want := strings.Join(NotActedOn(), ","), "PROMETHEUS_ADDR,MEMCACHE_SRV,BACKEND_TYPE=memcache"; got != want {
		t.Errorf("NotActedOn() = %s, want %s", got, want)
	}
	if !Deployment() {
		t.Error("BACKEND_TYPE set, and Deployment() is false")
	}
	unsetenv(t, "BACKEND_TYPE")
	if Deployment() {
		t.Error("no deployment variable set, and Deployment() is true")
	}
	if got := Names(func(v Var) bool { return v.Deployment }); !slices.Contains(got, "REDIS_URL") || len(got) != 7 {
		t.Errorf("deployment variables %v, want the 7 envoyproxy/ratelimit's Deployment sets, REDIS_URL among them", got)
	}
}

// The groups the telemetry and the xDS provider read from the table: each
// whole, in the order the start-up line names them.
func TestGroupsAreWhole(t *testing.T) {
	for _, tt := range []struct {
		match func(Var) bool
		want  string
	}{
		{InGroup("tracing"), "TRACING_SERVICE_NAME,TRACING_SERVICE_NAMESPACE,TRACING_SERVICE_INSTANCE_ID,TRACING_EXPORTER_PROTOCOL,TRACING_SAMPLING_RATE"},
		{InGroup("statsd"), "STATSD_HOST,STATSD_PORT,EXTRA_TAGS,STATS_FLUSH_INTERVAL"},
		{InGroup("dogstatsd"), "USE_DOG_STATSD_MOGRIFIERS"},
		{XDSTLS, "CONFIG_GRPC_XDS_CLIENT_TLS_CERT,CONFIG_GRPC_XDS_CLIENT_TLS_KEY,CONFIG_GRPC_XDS_SERVER_TLS_CACERT,CONFIG_GRPC_XDS_SERVER_TLS_SAN"},
		{PerSecondURL, "REDIS_PERSECOND_URL,REDIS_PERSECOND_TYPE,REDIS_PERSECOND_AUTH,REDIS_PERSECOND_TLS"},
	} {
		if got := strings.Join(Names(tt.match), ","); got != tt.want {
			t.Errorf("got %s, want %s", got, tt.want)
		}
	}
	if n := len(Names(InGroup("xds"))); n != 15 {
		t.Errorf("%d xDS variables, want envoyproxy/ratelimit's 15", n)
	}
}
