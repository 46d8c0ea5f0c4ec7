package service

import (
	"testing"
	"time"

	gostats "github.com/lyft/gostats"
	"github.com/lyft/gostats/mock"
)

// The response_time timer is sent in milliseconds, as envoyproxy/ratelimit
// sends it (statsd_exporter and its dashboards read "|ms" values as
// milliseconds); gostats's NewTimer would send microseconds, 1000× too
// high. Fractions of a millisecond are kept.
func TestStatsdResponseTimeIsInMilliseconds(t *testing.T) {
	sink := mock.NewSink()
	store := gostats.NewStore(sink, false)
	sd := &statsdSink{
		serviceError:  store.NewCounter("service_error"),
		totalRequests: store.NewCounter("total_requests"),
		responseTime:  store.NewTimer("response_time"),
	}
	for _, d := range []time.Duration{30 * time.Millisecond, 1500 * time.Microsecond} {
		sd.observe(d, nil)
	}
	store.Flush()
	if got, want := sink.Timer("response_time"), 31.5; got != want {
		t.Errorf("response_time = %v, want %v (milliseconds)", got, want)
	}
}
