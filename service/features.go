package service

// envoyproxy/ratelimit's descriptor features beyond the limit itself:
// share_threshold, value_to_metric and detailed_metric names, quota mode
// and the response's dynamic metadata.

import (
	"fmt"
	"strings"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicehq/sluice/config"
)

// shareEntries puts the pattern in place of the request's value at every
// level of r's path with share_threshold, so that every value the pattern
// matches counts in one key, as envoyproxy/ratelimit keys such a counter
// by its pattern. entries matched r, so they are as many as r.Path.
func shareEntries(r *config.RateLimit, entries []config.Entry) {
	for i := range entries {
		if i < len(r.Path) && r.Path[i].ShareThreshold {
			entries[i].Value = r.Path[i].Value
		}
	}
}

// levelName is the one builder of envoyproxy/ratelimit-style names of a
// descriptor: domain, then ".key" for each of n levels, and "_value" when
// the value is not empty or underscoreEmpty is set (detailed_metric's "_"
// for an empty value). level returns level i's key and value.
func levelName(domain string, n int, underscoreEmpty bool, level func(i int) (key, value string)) string {
	size := len(domain)
	for i := range n { // the length first: one allocation, not one per doubling
		k, v := level(i)
		size += 1 + len(k)
		if underscoreEmpty || v != "" {
			size += 1 + len(v)
		}
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString(domain)
	for i := range n {
		k, v := level(i)
		b.WriteByte('.')
		b.WriteString(k)
		if underscoreEmpty || v != "" {
			b.WriteByte('_')
			b.WriteString(v)
		}
	}
	return b.String()
}

// detailedName is the metrics name of a descriptor under a
// detailed_metric rule, as envoyproxy/ratelimit builds it: the domain,
// then ".key_value" per entry, the "_" even for an empty value unless the
// rule has a share_threshold level (shared: envoyproxy/ratelimit then
// writes just the key for an empty value); entries hold the patterns of
// share_threshold levels.
func detailedName(domain string, entries []config.Entry, shared bool) string {
	return levelName(domain, len(entries), !shared, func(i int) (string, string) {
		return entries[i].Key, entries[i].Value
	})
}

// valueToMetricName is the metrics name of a descriptor under a rule with
// value_to_metric on some level: r's FullKey, except that a level with
// value_to_metric that matched by key only or by a wildcard names the
// request's value instead (key_value, or just key for an empty value). A
// share_threshold level keeps its pattern, as its values share a counter.
func valueToMetricName(domain string, r *config.RateLimit, d *rlpb.RateLimitDescriptor) string {
	es := d.GetEntries()
	return levelName(domain, min(len(es), len(r.Path)), false, func(i int) (string, string) {
		pe := r.Path[i]
		v := pe.Value
		if pe.ValueToMetric && !pe.ShareThreshold && (v == "" || pe.Wildcard) {
			v = es[i].GetValue()
		}
		return pe.Key, v
	})
}

// descriptorName is domain.key_value.key_value, the FullKey style of a
// descriptor (a key with an empty value is just the key).
func descriptorName(domain string, d *rlpb.RateLimitDescriptor) string {
	es := d.GetEntries()
	return levelName(domain, len(es), false, func(i int) (string, string) {
		return es[i].GetKey(), es[i].GetValue()
	})
}

// isQuota reports whether a plan's descriptor counts as a quota: its rule
// has quota_mode, or under Config.QuotaMode any descriptor, a descriptor
// without a rule included; never one whose rule is unlimited, as in
// envoyproxy/ratelimit.
func (s *Service) isQuota(p *plan) bool {
	if p.rule != nil && p.rule.Unlimited {
		return false
	}
	return s.quota || p.rule != nil && p.rule.QuotaMode
}

// overall returns the response's code, as envoyproxy/ratelimit's quota
// mode has it: OVER_LIMIT when a descriptor that is not a quota is over
// its limit, or when there is a quota descriptor and every one of them is
// over. Without quotas that is: when any descriptor is over.
func (s *Service) overall(plans []plan, outs []outcome) pb.RateLimitResponse_Code {
	quotas, quotasOver := 0, 0
	for i := range outs {
		over := outs[i].st.GetCode() == pb.RateLimitResponse_OVER_LIMIT
		switch {
		case s.isQuota(&plans[i]):
			quotas++
			if over {
				quotasOver++
			}
		case over:
			return pb.RateLimitResponse_OVER_LIMIT
		}
	}
	if quotas > 0 && quotasOver == quotas {
		return pb.RateLimitResponse_OVER_LIMIT
	}
	return pb.RateLimitResponse_OK
}

// dynamicMetadata is the response's dynamic_metadata (Config.DynamicMetadata),
// in envoyproxy/ratelimit's shape: domain; descriptors, one per request
// descriptor, each with its entries as "key=value", its limit override
// in text ("requests_per_unit:N unit:UNIT") and its hitsAddend when set;
// the request's hitsAddend when not 0; and metadata, the deep merge of the
// metadata of the rules whose descriptors were admitted (OK, a rule
// matched, not unlimited), when not empty. A rule's metadata is kept
// whatever its metrics name or a limit override: envoyproxy/ratelimit
// loses it for a detailed_metric rule, a value_to_metric name and an
// override, which Sluice takes for a fault and does not copy.
func dynamicMetadata(req *pb.RateLimitRequest, plans []plan, outs []outcome) *structpb.Struct {
	fields := map[string]*structpb.Value{"domain": structpb.NewStringValue(req.GetDomain())}
	descs := make([]*structpb.Value, len(req.GetDescriptors()))
	for i, d := range req.GetDescriptors() {
		descs[i] = structpb.NewStructValue(descriptorStruct(d))
	}
	fields["descriptors"] = structpb.NewListValue(&structpb.ListValue{Values: descs})
	if h := req.GetHitsAddend(); h != 0 {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h))
	}
	if md := passedMetadata(plans, outs); md != nil {
		fields["metadata"] = md
	}
	return &structpb.Struct{Fields: fields}
}

// passedMetadata is dynamic_metadata's metadata: the metadata of the rules
// whose descriptors were admitted, merged; nil when there is none. The
// metadata of one rule alone is its cached value (ruleInfo.meta) when it
// has one.
func passedMetadata(plans []plan, outs []outcome) *structpb.Value {
	var first *plan
	var merged map[string]any
	for i := range plans {
		p := &plans[i]
		if p.meta == nil || outs[i].st.GetCode() != pb.RateLimitResponse_OK || p.rule == nil || p.rule.Unlimited {
			continue
		}
		if first == nil {
			first = p
			continue
		}
		if merged == nil {
			merged = make(map[string]any, len(first.meta))
			mergeMetadata(merged, first.meta)
		}
		mergeMetadata(merged, p.meta)
	}
	switch {
	case first == nil:
		return nil
	case merged == nil && first.metaVal != nil:
		return first.metaVal
	case merged == nil:
		merged = first.meta
	}
	st, err := structpb.NewStruct(merged)
	if err != nil {
		return nil // config's values always convert
	}
	return structpb.NewStructValue(st)
}

// descriptorStruct is one request descriptor in dynamic_metadata.
func descriptorStruct(d *rlpb.RateLimitDescriptor) *structpb.Struct {
	entries := make([]*structpb.Value, len(d.GetEntries()))
	for i, e := range d.GetEntries() {
		entries[i] = structpb.NewStringValue(e.GetKey() + "=" + e.GetValue())
	}
	f := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
	if o := d.GetLimit(); o != nil {
		f["limit"] = structpb.NewStringValue(fmt.Sprintf("requests_per_unit:%d unit:%s", o.GetRequestsPerUnit(), o.GetUnit()))
	}
	if h := d.GetHitsAddend(); h != nil {
		f["hitsAddend"] = structpb.NewNumberValue(float64(h.GetValue()))
	}
	return &structpb.Struct{Fields: f}
}

// mergeMetadata merges src into dst: a mapping in both is merged in turn;
// otherwise dst's value, the first one, stays. src is not changed: the
// mappings dst takes from it are copied.
func mergeMetadata(dst, src map[string]any) {
	for k, v := range src {
		cur, ok := dst[k]
		if !ok {
			if m, isMap := v.(map[string]any); isMap {
				c := make(map[string]any, len(m))
				mergeMetadata(c, m)
				v = c
			}
			dst[k] = v
			continue
		}
		cm, curIsMap := cur.(map[string]any)
		sm, srcIsMap := v.(map[string]any)
		if curIsMap && srcIsMap {
			mergeMetadata(cm, sm)
		}
	}
}
