// Package envflag holds the readers that the sluice commands share for
// their flags and environment variables: a flag's default comes from an
// environment variable, and a variable that is set but does not parse is
// collected (Errs) so that the command refuses it at start-up instead of
// running on the default.
//
// Every reader takes an empty variable for an unset one, and says whether
// it trims the spaces around a value.
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package (internal/archtest holds that).
package envflag

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// String returns the environment variable name, or def when it is unset or
// empty. The value is returned as written, not trimmed.
func String(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// Bool returns the environment variable name read as a boolean
// (strconv.ParseBool's forms, as envoyproxy/ratelimit reads them, spaces
// around it trimmed), or def when it is unset, empty or not a boolean. It
// records nothing: a command refuses a malformed one with Errs.Bools.
func Bool(name string, def bool) bool {
	if b, err := strconv.ParseBool(strings.TrimSpace(os.Getenv(name))); err == nil {
		return b
	}
	return def
}

// IsSet reports whether the flag name was set on fs's command line (a
// default taken from the environment is not set). It is false for a flag
// fs does not define and before fs is parsed.
func IsSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// Errs collects the environment variables that are set and do not parse,
// one error each, "NAME=\"value\": want ...", so that a command refuses
// them all at once (exit 2) instead of ignoring them. The zero Errs is
// empty and ready to use; errors.Join(e...) is the message to print.
type Errs []error

// Parse returns the environment variable name (spaces around it trimmed)
// read by parse, or def when it is unset or empty. A value parse refuses
// is recorded in e as "NAME=\"value\": want <want>", and def returned. It
// is the reader behind Duration, Int and Size, for the types they do not
// cover.
func Parse[T any](e *Errs, name string, def T, want string, parse func(string) (T, error)) T {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	x, err := parse(v)
	if err != nil {
		*e = append(*e, fmt.Errorf("%s=%q: want %s", name, v, want))
		return def
	}
	return x
}

// Duration returns the environment variable name as a time.Duration
// (time.ParseDuration's forms, or a whole number of seconds), or def when
// it is unset or empty; a malformed or negative value is recorded in e and
// def returned.
func (e *Errs) Duration(name string, def time.Duration) time.Duration {
	return Parse(e, name, def, "a duration such as 30s or 5m", func(v string) (time.Duration, error) {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			return time.Duration(n) * time.Second, nil
		}
		d, err := time.ParseDuration(v)
		if err == nil && d < 0 {
			err = errors.New("negative")
		}
		return d, err
	})
}

// Int returns the environment variable name as an integer, or def when it
// is unset or empty; a malformed value is recorded in e and def returned.
func (e *Errs) Int(name string, def int) int {
	return Parse(e, name, def, "an integer", strconv.Atoi)
}

// Size returns the environment variable name as a size in ParseSize's
// spelling, the one every size of the commands takes, or def when it is
// unset or empty; a malformed value is recorded in e and def returned.
func (e *Errs) Size(name string, def int64) int64 {
	return Parse(e, name, def, "a number of bytes, or of k, m or g, such as 1m", ParseSize)
}

// SizeVar defines on fs the size flag name (a Size, ParseSize's
// spelling), stored in bytes at p, whose default is the environment
// variable env read by Size (def when it is unset or empty; a malformed
// value is recorded in e and def kept).
func (e *Errs) SizeVar(fs *flag.FlagSet, p *int64, name, env string, def int64, usage string) {
	*p = e.Size(env, def)
	fs.Var(Size{P: p}, name, usage)
}

// Bools records in e each of the environment variables names that is set
// (not blank) and is not a boolean in strconv.ParseBool's forms: Bool,
// which reads them, would otherwise take its default without a word.
func (e *Errs) Bools(names ...string) {
	for _, name := range names {
		if v := strings.TrimSpace(os.Getenv(name)); v != "" {
			if _, err := strconv.ParseBool(v); err != nil {
				*e = append(*e, fmt.Errorf("%s=%q: want true or false", name, v))
			}
		}
	}
}

// Pairs reads the environment variable name, "k1<sep>v1,k2<sep>v2",
// by the one rule of every such variable (EXTRA_TAGS,
// CONFIG_GRPC_XDS_NODE_METADATA, CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS),
// which accepts all that envoyproxy/ratelimit accepts and reads it the
// same way: a blank value is no pairs (nil); items are split at every
// comma; an empty item (a trailing comma) is skipped, as
// envoyproxy/ratelimit's node metadata skips it (its envconfig maps refuse
// it); each item is cut at its first sep, keys and values kept as written,
// not trimmed. An item without sep or with an empty key is recorded in e,
// naming the variable, where envoyproxy/ratelimit drops it without a word
// (node metadata) or fails to start (the maps).
func (e *Errs) Pairs(name, sep string) map[string]string {
	v := os.Getenv(name)
	if strings.TrimSpace(v) == "" {
		return nil
	}
	out := map[string]string{}
	for item := range strings.SplitSeq(v, ",") {
		if item == "" {
			continue
		}
		k, val, ok := strings.Cut(item, sep)
		if !ok || k == "" {
			*e = append(*e, fmt.Errorf("%s=%q: want key%svalue pairs separated by commas; %q is not one", name, v, sep, item))
			continue
		}
		out[k] = val
	}
	return out
}

// ParseSize reads a size as NGINX writes one (client_max_body_size 1m): a
// whole number of bytes, or of KiB, MiB or GiB with the suffix k, m or g
// in either case. A negative number, a sign, an unknown suffix or a size
// over math.MaxInt64 bytes is an error naming s.
func ParseSize(s string) (int64, error) {
	num, mult := s, int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			num, mult = s[:n-1], 1<<10
		case 'm', 'M':
			num, mult = s[:n-1], 1<<20
		case 'g', 'G':
			num, mult = s[:n-1], 1<<30
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 || num[0] == '+' || v > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q: want a number of bytes, or of k, m or g, such as 1m", s)
	}
	return v * mult, nil
}

// Size is a flag.Value for a size in ParseSize's spelling (1048576, 1024k,
// 1m), stored in bytes at P. The zero Size (P nil) prints as "0" and
// refuses Set with an error.
type Size struct{ P *int64 }

// String is the size in bytes; "0" for the zero Size.
func (f Size) String() string {
	if f.P == nil {
		return "0"
	}
	return strconv.FormatInt(*f.P, 10)
}

// Set parses s with ParseSize into *f.P; a malformed s is ParseSize's
// error and leaves *f.P as it was.
func (f Size) Set(s string) error {
	if f.P == nil {
		return errors.New("size flag with nowhere to store it")
	}
	n, err := ParseSize(s)
	if err != nil {
		return err
	}
	*f.P = n
	return nil
}

// SameValue reports whether the environment value v means want: equal
// without case, or the same boolean (strconv.ParseBool's spellings).
func SameValue(v, want string) bool {
	if strings.EqualFold(v, want) {
		return true
	}
	b, err := strconv.ParseBool(v)
	return err == nil && strconv.FormatBool(b) == want
}
