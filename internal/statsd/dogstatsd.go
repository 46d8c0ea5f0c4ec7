// Package statsd is the DogStatsD sink of envoyproxy/ratelimit's
// USE_DOG_STATSD for a lyft/gostats store: each stat is written as a
// DogStatsD line, its gostats-encoded tags (".__key=value" in the name,
// EXTRA_TAGS) turned into DogStatsD tags, and its name rewritten by the
// first mogrifier whose pattern matches (USE_DOG_STATSD_MOGRIFIERS).
// Plain statsd needs no package: gostats's own net sink writes it.
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package (internal/archtest holds that).
package statsd

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// DatagramBytes is the most bytes one datagram carries: lines are packed
// into datagrams of at most this size (an Ethernet MTU less the IP and
// UDP headers), and a longer line is sent alone.
const DatagramBytes = 1432

// A Mogrifier rewrites the stats whose name matches Pattern: the name
// becomes Name and the stat gets Tags, "$0", "$1"… in either replaced by
// the pattern's match and submatches, as envoyproxy/ratelimit's
// DOG_STATSD_MOGRIFIER_<N>_{PATTERN,NAME,TAGS} do.
type Mogrifier struct {
	Pattern *regexp.Regexp
	Name    string
	Tags    []Tag
}

// Tag is one DogStatsD tag of a Mogrifier; Value may hold "$N" references.
type Tag struct{ Key, Value string }

var dollar = regexp.MustCompile(`\$\d+`)

// expand replaces "$N" in tmpl with match[N] ("" when N is past the
// submatches).
func expand(tmpl string, match []string) string {
	return dollar.ReplaceAllStringFunc(tmpl, func(ref string) string {
		n, err := strconv.Atoi(ref[1:])
		if err != nil || n >= len(match) {
			return ""
		}
		return match[n]
	})
}

// MogrifiersFromEnv reads the mogrifiers named in names (the value of
// USE_DOG_STATSD_MOGRIFIERS, comma-separated) through lookup (os.LookupEnv):
// DOG_STATSD_MOGRIFIER_<name>_PATTERN (a regular expression, required),
// _NAME (required) and _TAGS ("key:value" pairs separated by commas). They
// are tried in the order named.
func MogrifiersFromEnv(names string, lookup func(string) (string, bool)) ([]Mogrifier, error) {
	var out []Mogrifier
	for name := range strings.SplitSeq(names, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		m, err := mogrifierFromEnv(name, lookup)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func mogrifierFromEnv(name string, lookup func(string) (string, bool)) (Mogrifier, error) {
	prefix := "DOG_STATSD_MOGRIFIER_" + name + "_"
	get := func(suffix string) string {
		v, _ := lookup(prefix + suffix)
		return v
	}
	var m Mogrifier
	pattern := get("PATTERN")
	if pattern == "" {
		return m, fmt.Errorf("%sPATTERN is not set", prefix)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return m, fmt.Errorf("%sPATTERN: %w", prefix, err)
	}
	m.Pattern = re
	if m.Name = get("NAME"); m.Name == "" {
		return m, fmt.Errorf("%sNAME is not set", prefix)
	}
	if tags := get("TAGS"); tags != "" {
		for pair := range strings.SplitSeq(tags, ",") {
			k, v, ok := strings.Cut(pair, ":")
			if !ok || k == "" || v == "" {
				return m, fmt.Errorf("%sTAGS=%q: want key:value pairs separated by commas", prefix, tags)
			}
			m.Tags = append(m.Tags, Tag{k, v})
		}
	}
	return m, nil
}

// DogSink is a gostats sink (gostats.FlushableSink, without importing
// gostats) that sends DogStatsD lines over UDP. It is
// safe for concurrent use; its zero value is not usable: make one with
// NewDogSink.
type DogSink struct {
	conn net.Conn
	mogs []Mogrifier

	mu    sync.Mutex
	buf   []byte               // lines not yet sent, at most DatagramBytes unless one line is longer
	line  []byte               // scratch for one line
	names map[string]lineParts // the parts of the names sent, up to maxCachedNames
}

// NewDogSink returns a sink sending to addr (host:port) over UDP, with
// mogs applied to every name.
func NewDogSink(addr string, mogs []Mogrifier) (*DogSink, error) {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("statsd: DogStatsD at %s: %w", addr, err)
	}
	return &DogSink{conn: conn, mogs: mogs}, nil
}

// FlushCounter sends a counter's increment.
func (s *DogSink) FlushCounter(name string, value uint64) { s.write(name, value, "c") }

// FlushGauge sends a gauge's value.
func (s *DogSink) FlushGauge(name string, value uint64) { s.write(name, value, "g") }

// FlushTimer sends one timing, in the timer's unit, as a whole number.
func (s *DogSink) FlushTimer(name string, value float64) {
	v := uint64(0)
	if value > 0 {
		v = uint64(value)
	}
	s.write(name, v, "ms")
}

// Flush sends the lines still buffered.
func (s *DogSink) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.send()
}

// Close flushes and closes the connection.
func (s *DogSink) Close() error {
	s.Flush()
	return s.conn.Close()
}

// Line returns the DogStatsD line of a stat: its name mogrified, its
// gostats tags and the mogrifier's as "|#key:value,…".
func (s *DogSink) Line(dst []byte, name string, value uint64, kind string) []byte {
	return appendLine(dst, s.parts(name), value, kind)
}

// lineParts is what a stat's line is made of besides its value and kind:
// the name as sent, and the tags ("|#key:value,…", or "").
type lineParts struct{ name, tags string }

// maxCachedNames bounds DogSink.names: the stat names are the service's
// (bounded by the detailed series cap) and the runtime's, far fewer.
const maxCachedNames = 4096

// parts mogrifies name and turns its tags into DogStatsD's.
func (s *DogSink) parts(name string) lineParts {
	base, tagText, hasTags := strings.Cut(name, ".__")
	var mogTags []Tag
	var match []string
	for _, m := range s.mogs {
		if match = m.Pattern.FindStringSubmatch(base); match != nil {
			base, mogTags = expand(m.Name, match), m.Tags
			break
		}
	}
	var tags []byte
	sep := "|#"
	if hasTags {
		for pair := range strings.SplitSeq(tagText, ".__") {
			k, v, ok := strings.Cut(pair, "=")
			if !ok {
				continue // not a gostats tag
			}
			tags = append(append(append(append(tags, sep...), k...), ':'), v...)
			sep = ","
		}
	}
	for _, t := range mogTags {
		tags = append(append(append(append(tags, sep...), t.Key...), ':'), expand(t.Value, match)...)
		sep = ","
	}
	return lineParts{base, string(tags)}
}

// appendLine appends the line of p with value and kind to dst.
func appendLine(dst []byte, p lineParts, value uint64, kind string) []byte {
	dst = append(dst, p.name...)
	dst = append(dst, ':')
	dst = strconv.AppendUint(dst, value, 10)
	dst = append(dst, '|')
	dst = append(dst, kind...)
	dst = append(dst, p.tags...)
	return append(dst, '\n')
}

// write buffers one line, with name's parts made once (the mogrifiers'
// regular expressions run once per name, not once per stat sent: a timer
// sends one per decision) for up to maxCachedNames names.
func (s *DogSink) write(name string, value uint64, kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.names[name]
	if !ok {
		p = s.parts(name)
		if len(s.names) < maxCachedNames {
			if s.names == nil {
				s.names = make(map[string]lineParts)
			}
			s.names[name] = p
		}
	}
	s.line = appendLine(s.line[:0], p, value, kind)
	if len(s.buf)+len(s.line) > DatagramBytes {
		s.send()
	}
	s.buf = append(s.buf, s.line...)
}

// send writes the buffer as one datagram; s.mu is held.
func (s *DogSink) send() {
	if len(s.buf) == 0 {
		return
	}
	// An agent not listening (yet) drops the datagram, as UDP does.
	s.conn.Write(s.buf)
	s.buf = s.buf[:0]
}
