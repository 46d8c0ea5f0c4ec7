package config

import (
	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/strictyaml"
)

// maxMetadataDepth bounds the nesting of a descriptor's metadata, so that
// reading it cannot exhaust the stack whatever the file holds.
const maxMetadataDepth = 32

// metadata reads a descriptor's metadata: a mapping of any keys to any
// values. Mappings become map[string]any, lists []any, and scalars
// string, int64, float64, bool or nil by their YAML tag. nil when n is
// null or empty.
func (p *parser) metadata(n *yaml.Node) (map[string]any, error) {
	n = deref(n)
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, "metadata must be a mapping, not %s", kind(n))
	}
	v, err := p.metaValue(n, 0)
	if err != nil {
		return nil, err
	}
	m := v.(map[string]any)
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

// metaValue reads one metadata node at depth.
func (p *parser) metaValue(n *yaml.Node, depth int) (any, error) {
	n = deref(n)
	if depth > maxMetadataDepth {
		return nil, p.errf(n, "metadata nested deeper than %d levels", maxMetadataDepth)
	}
	switch n.Kind {
	case yaml.MappingNode:
		pairs, err := p.doc.Pairs(n, "metadata")
		if err != nil {
			return nil, err
		}
		m := make(map[string]any, len(pairs))
		for _, pr := range pairs {
			if m[pr.Key.Value], err = p.metaValue(pr.Value, depth+1); err != nil {
				return nil, err
			}
		}
		return m, nil
	case yaml.SequenceNode:
		l := make([]any, len(n.Content))
		for i, c := range n.Content {
			var err error
			if l[i], err = p.metaValue(c, depth+1); err != nil {
				return nil, err
			}
		}
		return l, nil
	case yaml.ScalarNode:
		return p.metaScalar(n)
	}
	return nil, p.errf(n, "metadata cannot hold %s", kind(n))
}

// metaScalar reads a metadata scalar by its tag.
func (p *parser) metaScalar(n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, p.errf(n, "metadata value %q is not a boolean", n.Value)
		}
		return b, nil
	case "!!int", "!!float":
		var i int64
		if n.ShortTag() == "!!int" && n.Decode(&i) == nil {
			return i, nil
		}
		var f float64 // a float, or an int too large for int64
		if err := n.Decode(&f); err != nil {
			return nil, p.errf(n, "metadata value %q is not a number", n.Value)
		}
		return f, nil
	case "!!timestamp":
		return n.Value, nil // a date, as written
	case "!!str":
		// A plain yes, on, n, ... is a string to this package's YAML 1.2
		// reader and a boolean to envoyproxy/ratelimit's YAML 1.1 one;
		// metadata, which has no schema to say which is meant, reads it as
		// envoyproxy/ratelimit does, with a warning that quoting it makes
		// it a string.
		if strictyaml.IsYAML11Bool(n) {
			b, _ := strictyaml.Bool(n)
			p.warnf(n, "metadata value %s read as the boolean %t, as envoyproxy/ratelimit (YAML 1.1) reads it: quote it (%q) for a string, or write %t", n.Value, b, n.Value, b)
			return b, nil
		}
		return n.Value, nil
	}
	return nil, p.errf(n, "metadata value %q has the tag %s, which metadata cannot hold", n.Value, n.ShortTag())
}
