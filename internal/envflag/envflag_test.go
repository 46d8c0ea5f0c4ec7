package envflag_test

import (
	"errors"
	"flag"
	"io"
	"maps"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/envflag"
)

// setenv sets the variable name to v for the test, or leaves it unset when
// v is nil (restoring it at the end either way).
func setenv(t *testing.T, name string, v *string) {
	t.Helper()
	t.Setenv(name, "")
	if v == nil {
		if err := os.Unsetenv(name); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Setenv(name, *v)
}

func ptr(s string) *string { return &s }

// checkErrs fails the test unless errs holds exactly one error when
// malformed is true (naming the variable and its value), none otherwise.
func checkErrs(t *testing.T, errs envflag.Errs, name string, value *string, malformed bool) {
	t.Helper()
	if !malformed {
		if len(errs) != 0 {
			t.Errorf("errors %v, want none", errs)
		}
		return
	}
	if len(errs) != 1 {
		t.Fatalf("errors %v, want one", errs)
	}
	msg := errs[0].Error()
	if !strings.HasPrefix(msg, name+"=") || !strings.Contains(msg, strings.TrimSpace(*value)) || !strings.Contains(msg, ": want ") {
		t.Errorf("error %q, want NAME=\"value\": want ... naming %s and %q", msg, name, *value)
	}
}

// readerCase is one value of the variable ENVFLAG_TEST (nil: unset), what
// a reader returns for it, and whether it records the value as malformed.
type readerCase[T comparable] struct {
	name      string
	value     *string
	want      T
	malformed bool
}

// testReader runs read on each case's value of ENVFLAG_TEST, checking what
// it returns and what it records (checkErrs); what names the reader in
// failures.
func testReader[T comparable](t *testing.T, what string, read func(*envflag.Errs) T, cases []readerCase[T]) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			setenv(t, "ENVFLAG_TEST", tt.value)
			var errs envflag.Errs
			if got := read(&errs); got != tt.want {
				t.Errorf("%s = %v, want %v", what, got, tt.want)
			}
			checkErrs(t, errs, "ENVFLAG_TEST", tt.value, tt.malformed)
		})
	}
}

// An unset or empty variable is the default; a set one is returned as
// written, spaces kept.
func TestStringIsTheValueOrTheDefault(t *testing.T) {
	for _, tt := range []struct {
		name  string
		value *string
		want  string
	}{
		{"unset", nil, "def"},
		{"empty", ptr(""), "def"},
		{"set", ptr("x"), "x"},
		{"kept as written", ptr(" x "), " x "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			setenv(t, "ENVFLAG_TEST", tt.value)
			if got := envflag.String("ENVFLAG_TEST", "def"); got != tt.want {
				t.Errorf("String = %q, want %q", got, tt.want)
			}
		})
	}
}

// Bool and Errs.Bools read a variable alike (spaces trimmed, ParseBool's
// forms): what the check accepts, the reader acts on; what it refuses is
// named with its value.
func TestBoolReadsWhatBoolsAccepts(t *testing.T) {
	for _, tt := range []struct {
		name      string
		value     *string
		def, want bool
		malformed bool
	}{
		{"unset", nil, true, true, false},
		{"empty", ptr(""), true, true, false},
		{"true", ptr("true"), false, true, false},
		{"1", ptr("1"), false, true, false},
		{"FALSE", ptr("FALSE"), true, false, false},
		{"spaces trimmed", ptr(" true "), false, true, false},
		{"blank is unset", ptr("  "), true, true, false},
		{"malformed", ptr("yes"), true, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			setenv(t, "ENVFLAG_TEST", tt.value)
			if got := envflag.Bool("ENVFLAG_TEST", tt.def); got != tt.want {
				t.Errorf("Bool(def %v) = %v, want %v", tt.def, got, tt.want)
			}
			var errs envflag.Errs
			errs.Bools("ENVFLAG_OTHER", "ENVFLAG_TEST")
			checkErrs(t, errs, "ENVFLAG_TEST", tt.value, tt.malformed)
			if tt.malformed && !strings.Contains(errs[0].Error(), "want true or false") {
				t.Errorf("error %q, want it to ask for true or false", errs[0])
			}
		})
	}
}

// A duration is whole seconds or Go's form; a negative or malformed one is
// refused by name and the default kept.
func TestDuration(t *testing.T) {
	testReader(t, "Duration", func(errs *envflag.Errs) time.Duration { return errs.Duration("ENVFLAG_TEST", 7*time.Second) }, []readerCase[time.Duration]{
		{"unset", nil, 7 * time.Second, false},
		{"empty", ptr(""), 7 * time.Second, false},
		{"whole seconds", ptr("30"), 30 * time.Second, false},
		{"zero", ptr("0"), 0, false},
		{"Go duration", ptr("1m30s"), 90 * time.Second, false},
		{"spaces trimmed", ptr(" 5m "), 5 * time.Minute, false},
		{"negative seconds", ptr("-3"), 7 * time.Second, true},
		{"negative duration", ptr("-3s"), 7 * time.Second, true},
		{"malformed", ptr("soon"), 7 * time.Second, true},
	})
}

// An integer variable: malformed or out of int's range is refused by name.
func TestInt(t *testing.T) {
	testReader(t, "Int", func(errs *envflag.Errs) int { return errs.Int("ENVFLAG_TEST", 5) }, []readerCase[int]{
		{"unset", nil, 5, false},
		{"set", ptr("12"), 12, false},
		{"negative", ptr("-1"), -1, false},
		{"spaces trimmed", ptr(" 3 "), 3, false},
		{"malformed", ptr("12k"), 5, true},
		{"too large", ptr("99999999999999999999"), 5, true},
	})
}

// A size variable takes ParseSize's spelling; anything else is refused by
// name and the default kept.
func TestSize(t *testing.T) {
	testReader(t, "Size", func(errs *envflag.Errs) int64 { return errs.Size("ENVFLAG_TEST", 9) }, []readerCase[int64]{
		{"unset", nil, 9, false},
		{"bytes", ptr("1048576"), 1 << 20, false},
		{"k", ptr("2k"), 2 << 10, false},
		{"M", ptr("3M"), 3 << 20, false},
		{"g", ptr("1g"), 1 << 30, false},
		{"zero", ptr("0"), 0, false},
		{"unknown suffix", ptr("1t"), 9, true},
		{"negative", ptr("-1"), 9, true},
		{"sign", ptr("+1"), 9, true},
		{"overflow", ptr("9999999999g"), 9, true},
		{"suffix alone", ptr("k"), 9, true},
	})
}

// ParseSize reaches math.MaxInt64 bytes and refuses a size past it.
func TestParseSizeBounds(t *testing.T) {
	max := "9223372036854775807"
	if got, err := envflag.ParseSize(max); err != nil || got != math.MaxInt64 {
		t.Errorf("ParseSize(%s) = %d, %v; want MaxInt64", max, got, err)
	}
	if _, err := envflag.ParseSize("8589934592g"); err == nil || !strings.Contains(err.Error(), `"8589934592g"`) {
		t.Errorf("ParseSize over MaxInt64: %v, want an error naming the size", err)
	}
}

// Every malformed variable is recorded, in order, so that a command names
// them all at once; a good one between them is read.
func TestParseRecordsEveryMalformedVariable(t *testing.T) {
	t.Setenv("ENVFLAG_A", "x")
	t.Setenv("ENVFLAG_B", "2")
	t.Setenv("ENVFLAG_C", "y")
	parse := func(v string) (int, error) {
		if v == "2" {
			return 2, nil
		}
		return 0, errors.New("not two")
	}
	var errs envflag.Errs
	a := envflag.Parse(&errs, "ENVFLAG_A", 1, "two", parse)
	b := envflag.Parse(&errs, "ENVFLAG_B", 1, "two", parse)
	c := envflag.Parse(&errs, "ENVFLAG_C", 1, "two", parse)
	if a != 1 || b != 2 || c != 1 {
		t.Errorf("Parse = %d, %d, %d; want the default, 2, the default", a, b, c)
	}
	want := `ENVFLAG_A="x": want two` + "\n" + `ENVFLAG_C="y": want two`
	if got := errors.Join(errs...); got == nil || got.Error() != want {
		t.Errorf("errors %q, want %q", got, want)
	}
}

// Pairs: blank is none, empty items are skipped, keys and values are kept
// as written, and an item without the separator or key is refused by name.
func TestPairs(t *testing.T) {
	for _, tt := range []struct {
		name      string
		value     *string
		want      map[string]string
		malformed bool
	}{
		{"unset", nil, nil, false},
		{"blank", ptr("  "), nil, false},
		{"pairs", ptr("a=1,b=2"), map[string]string{"a": "1", "b": "2"}, false},
		{"kept as written", ptr(" a = 1 ,b=x=y"), map[string]string{" a ": " 1 ", "b": "x=y"}, false},
		{"empty items skipped", ptr("a=1,,b=,"), map[string]string{"a": "1", "b": ""}, false},
		{"no separator", ptr("a=1,zone"), map[string]string{"a": "1"}, true},
		{"empty key", ptr("=1"), map[string]string{}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			setenv(t, "ENVFLAG_TEST", tt.value)
			var errs envflag.Errs
			got := errs.Pairs("ENVFLAG_TEST", "=")
			if !maps.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
				t.Errorf("Pairs = %#v, want %#v", got, tt.want)
			}
			checkErrs(t, errs, "ENVFLAG_TEST", tt.value, tt.malformed)
		})
	}
}

// IsSet is true only for a flag given on the command line, never for a
// default (which may come from the environment).
func TestIsSetOnlyFromTheCommandLine(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("a", "from the environment", "")
	fs.String("b", "", "")
	if envflag.IsSet(fs, "a") {
		t.Error("IsSet before Parse = true")
	}
	if err := fs.Parse([]string{"-b", "x"}); err != nil {
		t.Fatal(err)
	}
	if envflag.IsSet(fs, "a") || !envflag.IsSet(fs, "b") || envflag.IsSet(fs, "undefined") {
		t.Errorf("IsSet a, b, undefined = %v, %v, %v; want false, true, false",
			envflag.IsSet(fs, "a"), envflag.IsSet(fs, "b"), envflag.IsSet(fs, "undefined"))
	}
}

// Size as a flag: parses the spelling, names the flag and value when it
// refuses one, keeps the old size then; the zero Size refuses Set.
func TestSizeFlag(t *testing.T) {
	var n int64 = 5
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(envflag.Size{P: &n}, "max", "")
	if err := fs.Parse([]string{"-max", "2m"}); err != nil || n != 2<<20 {
		t.Fatalf("-max 2m: %d, %v; want %d", n, err, 2<<20)
	}
	if got := fs.Lookup("max").Value.String(); got != "2097152" {
		t.Errorf("String = %q, want 2097152", got)
	}
	err := fs.Parse([]string{"-max", "2x"})
	if err == nil || !strings.Contains(err.Error(), "-max") || !strings.Contains(err.Error(), `"2x"`) {
		t.Errorf("-max 2x: %v, want an error naming the flag and the value", err)
	}
	if n != 2<<20 {
		t.Errorf("a refused value changed the size to %d", n)
	}
	var zero envflag.Size
	if zero.String() != "0" {
		t.Errorf("zero Size prints %q, want 0", zero.String())
	}
	if err := zero.Set("1"); err == nil {
		t.Error("zero Size: Set succeeded, want an error")
	}
}

// SizeVar's flag starts at the variable's size, the command line wins
// over it, and a malformed variable is recorded with the default kept.
func TestSizeVarDefaultsFromTheEnvironment(t *testing.T) {
	for _, tt := range []struct {
		name      string
		value     *string
		args      []string
		want      int64
		malformed bool
	}{
		{"unset", nil, nil, 7, false},
		{"from the variable", ptr("3k"), nil, 3 << 10, false},
		{"the flag wins", ptr("3k"), []string{"-max", "1m"}, 1 << 20, false},
		{"malformed", ptr("3x"), nil, 7, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			setenv(t, "ENVFLAG_TEST", tt.value)
			var errs envflag.Errs
			var n int64
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			errs.SizeVar(fs, &n, "max", "ENVFLAG_TEST", 7, "")
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if n != tt.want {
				t.Errorf("size = %d, want %d", n, tt.want)
			}
			checkErrs(t, errs, "ENVFLAG_TEST", tt.value, tt.malformed)
		})
	}
}
