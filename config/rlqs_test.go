package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
)

func TestRLQSSectionIsParsedWithDefaults(t *testing.T) {
	d, err := config.Parse("a.yaml", []byte("domain: a\nrlqs:\n  assignment_ttl: 30s\n  reserve: 0.1\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := d.RLQS
	if r.TTL() != 30*time.Second || r.ReserveFraction() != 0.1 || r.Abandon() != config.DefaultRLQSAbandonAfter || r.ReportLife() != config.DefaultRLQSReportTTL || r.Line != 2 {
		t.Errorf("got %+v (ttl %v, abandon %v, report %v, reserve %v)", r, r.TTL(), r.Abandon(), r.ReportLife(), r.ReserveFraction())
	}
	var none *config.RLQS
	if none.TTL() != config.DefaultRLQSAssignmentTTL || none.ReserveFraction() != config.DefaultRLQSReserve {
		t.Error("a nil section does not give the defaults")
	}
}

func TestBadRLQSSectionsAreRefusedWithFileAndLine(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"domain: a\nrlqs:\n  assignment_ttl: 500ms\n", "a.yaml:3"},
		{"domain: a\nrlqs:\n  assignment_ttl: 1.5s\n", "whole number of seconds"},
		{"domain: a\nrlqs:\n  abandon_after: forever\n", "a.yaml:3"},
		{"domain: a\nrlqs:\n  reserve: 0.9\n", "at most 0.5"},
		{"domain: a\nrlqs:\n  reserve: 0\n", "above 0"},
		{"domain: a\nrlqs:\n  fairness: max-min\n", "unknown key \"fairness\""},
		{"domain: a\nrlqs: [1]\n", "a.yaml:2"},
	} {
		_, err := config.Parse("a.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one with %q", tc.yaml, err, tc.want)
		}
	}
}

func TestTwoRLQSSectionsOfOneMergedDomainAreRefused(t *testing.T) {
	a, _ := config.Parse("a.yaml", []byte("domain: d\nrlqs: {reserve: 0.1}\n"))
	b, _ := config.Parse("b.yaml", []byte("domain: d\nrlqs: {reserve: 0.2}\n"))
	_, err := config.Options{MergeDomains: true}.New(a, b)
	if err == nil || !strings.Contains(err.Error(), "b.yaml:2") || !strings.Contains(err.Error(), "a.yaml:2") {
		t.Errorf("error %v, want one naming both sections", err)
	}
	c, _ := config.Parse("c.yaml", []byte("domain: d\n"))
	m, err := config.Options{MergeDomains: true}.New(c, a)
	if err != nil || m.Domain("d").RLQS.Reserve != 0.1 {
		t.Errorf("merging with one section: %v, %v", m.Domain("d").RLQS, err)
	}
}

const bucketYAML = `domain: d
descriptors:
  - key: tenant
    descriptors:
      - key: api
        value: search
        rate_limit: {unit: second, requests_per_unit: 1}
      - key: api
        rate_limit: {unit: second, requests_per_unit: 2}
  - key: api
    value: "sea*"
    rate_limit: {unit: second, requests_per_unit: 3}
`

func TestABucketIdIsASetOfEntriesInTheTreesOrder(t *testing.T) {
	d, err := config.Parse("d.yaml", []byte(bucketYAML))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   map[string]string
		want uint32 // 0: no rule
		path string
	}{
		{map[string]string{"tenant": "acme", "api": "search"}, 1, "tenant=acme,api=search"},
		{map[string]string{"api": "other", "tenant": "acme"}, 2, "tenant=acme,api=other"},
		{map[string]string{"api": "seat"}, 3, "api=seat"},
		{map[string]string{"api": "x"}, 0, ""},
		{map[string]string{"tenant": "acme"}, 0, ""},
		{map[string]string{"tenant": "acme", "api": "search", "x": "y"}, 0, ""},
		{map[string]string{}, 0, ""},
	} {
		r, path := d.LookupBucket(tc.id)
		var got []string
		for _, e := range path {
			got = append(got, e.Key+"="+e.Value)
		}
		if (r == nil) != (tc.want == 0) || r != nil && (r.RequestsPerUnit != tc.want || strings.Join(got, ",") != tc.path) {
			t.Errorf("%v: rule %v path %v, want %d by %s", tc.id, r, got, tc.want, tc.path)
		}
	}
}
