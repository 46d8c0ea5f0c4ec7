package sim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// Replay is a recorded sequence of arrivals, read by ReadReplay. Its keys are
// numbered in order of first appearance.
type Replay struct {
	evs   []Event
	names []string
	name  string
}

// The instants a replay may hold: those whose Unix nanoseconds fit in int64,
// from 1677-09-21 to 2262-04-11.
var (
	minInstant = time.Unix(0, -1<<63)
	maxInstant = time.Unix(0, 1<<63-1)
)

// ReadReplay reads arrivals from r, one per line, in time order:
//
//	timestamp,key[,cost]
//
// Fields are separated by a comma or, when a line has no comma, by spaces or
// tabs. The timestamp is either RFC 3339 ("2025-01-01T00:00:00.25Z", any
// offset, up to nanoseconds) or Unix seconds with an optional fraction
// ("1735689600.25"). The key is any non-empty text without the separator; the
// cost, when present, is a whole number of at least 1 (default 1). Blank
// lines and lines starting with '#' are skipped, and so is a first line whose
// first field is "timestamp" or "time" (a CSV header). Lines may repeat an
// instant but must not go back in time.
//
// Errors name the line and the column (in bytes, from 1) of the bad field.
// name labels the replay in reports; use the file's name.
func ReadReplay(r io.Reader, name string) (*Replay, error) {
	p := &Replay{name: name}
	ids := make(map[string]uint32)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	var prev int64
	var prevText string
	line, data := 0, 0
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if t := strings.TrimSpace(text); t == "" || t[0] == '#' {
			continue
		}
		fields := splitFields(text)
		data++
		if data == 1 {
			if f := strings.ToLower(fields[0].text); f == "timestamp" || f == "time" {
				continue
			}
		}
		errAt := func(f field, format string, args ...any) error {
			return fmt.Errorf("sim: %s: line %d, column %d: %s", name, line, f.col, fmt.Sprintf(format, args...))
		}
		if len(fields) < 2 {
			return nil, fmt.Errorf("sim: %s: line %d: want timestamp,key[,cost], got %d field(s)", name, line, len(fields))
		}
		if len(fields) > 3 {
			return nil, errAt(fields[3], "unexpected fourth field %q: want timestamp,key[,cost]", fields[3].text)
		}
		at, err := parseInstant(fields[0].text)
		if err != nil {
			return nil, errAt(fields[0], "%v", err)
		}
		if len(p.evs) > 0 && at < prev {
			return nil, errAt(fields[0], "timestamp %s is before the previous line's %s: the file must be sorted by time", fields[0].text, prevText)
		}
		key := fields[1].text
		if key == "" || len(key) > sluice.MaxKeyLen {
			return nil, errAt(fields[1], "key must have 1 to %d bytes, has %d", sluice.MaxKeyLen, len(key))
		}
		cost := int64(1)
		if len(fields) == 3 {
			cost, err = strconv.ParseInt(fields[2].text, 10, 32)
			if err != nil || cost < 1 {
				return nil, errAt(fields[2], "cost %q must be a whole number from 1 to %d", fields[2].text, int32(1<<31-1))
			}
		}
		id, ok := ids[key]
		if !ok {
			if len(p.names) == 1<<32-1 {
				return nil, errAt(fields[1], "too many keys")
			}
			id = uint32(len(p.names))
			ids[key] = id
			p.names = append(p.names, key)
		}
		p.evs = append(p.evs, Event{At: at, Key: id, Cost: int32(cost)})
		prev, prevText = at, fields[0].text
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("sim: %s: line %d: %w", name, line+1, err)
	}
	if len(p.evs) == 0 {
		return nil, fmt.Errorf("sim: %s: no arrivals: the file is empty or holds only blank lines, comments and a header", name)
	}
	return p, nil
}

// field is one field of a replay line and its column, from 1.
type field struct {
	text string
	col  int
}

// splitFields splits a line at commas, or at runs of spaces and tabs when it
// has no comma, trimming spaces around each field.
func splitFields(s string) []field {
	var fs []field
	if strings.Contains(s, ",") {
		col := 0
		for part := range strings.SplitSeq(s, ",") {
			lead := len(part) - len(strings.TrimLeft(part, " \t"))
			if lead == len(part) {
				lead = 0 // an empty field: point at where it starts
			}
			fs = append(fs, field{strings.TrimSpace(part), col + lead + 1})
			col += len(part) + 1
		}
		return fs
	}
	i := 0
	for i < len(s) {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		j := i
		for j < len(s) && s[j] != ' ' && s[j] != '\t' {
			j++
		}
		if j > i {
			fs = append(fs, field{s[i:j], i + 1})
		}
		i = j
	}
	return fs
}

var errRange = fmt.Errorf("out of range: instants must fall between %d and %d (int64 nanoseconds since 1970)", minInstant.Year(), maxInstant.Year())

// badInstant is parseInstant's error for a timestamp in neither format.
func badInstant(s string) error {
	return fmt.Errorf("bad timestamp %q: want RFC 3339 (2025-01-01T00:00:00Z) or Unix seconds (1735689600.25)", s)
}

// parseInstant parses RFC 3339 or Unix seconds with an optional fraction,
// exactly (no floating point), into Unix nanoseconds.
func parseInstant(s string) (int64, error) {
	if strings.ContainsAny(s, "-:T") && !strings.HasPrefix(s, "-") {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, badInstant(s)
		}
		if t.Before(minInstant) || t.After(maxInstant) {
			return 0, fmt.Errorf("timestamp %s is %w", s, errRange)
		}
		return t.UnixNano(), nil
	}
	whole, frac, _ := strings.Cut(s, ".")
	neg := strings.HasPrefix(whole, "-")
	digits := strings.TrimPrefix(whole, "-")
	if digits == "" || !allDigits(digits) || !allDigits(frac) || len(frac) > 9 {
		if len(frac) > 9 && allDigits(frac) {
			return 0, fmt.Errorf("timestamp %q has more than 9 decimal places", s)
		}
		return 0, badInstant(s)
	}
	sec, err := strconv.ParseInt(digits, 10, 64)
	const maxSec = (1<<63 - 1) / 1000000000
	if errors.Is(err, strconv.ErrRange) || sec >= maxSec {
		return 0, fmt.Errorf("timestamp %s is %w", s, errRange)
	}
	if err != nil {
		return 0, badInstant(s)
	}
	ns, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
	v := sec*1e9 + ns
	if neg {
		v = -v
	}
	return v, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Name implements Pattern.
func (p *Replay) Name() string { return fmt.Sprintf("replay of %s (%d arrivals)", p.name, len(p.evs)) }

// Len returns the number of arrivals.
func (p *Replay) Len() int { return len(p.evs) }

// Key returns the name of key number k.
func (p *Replay) Key(k uint32) string { return p.names[k] }

func (p *Replay) keys(*Config) int { return len(p.names) }

// span runs from the first arrival to just after the last one.
func (p *Replay) span(*Config) (int64, int64) {
	return p.evs[0].At, p.evs[len(p.evs)-1].At + 1
}

func (p *Replay) events(*Config, *rand.Rand) iter.Seq[Event] { return slices.Values(p.evs) }
