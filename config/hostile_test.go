package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/safefile"
	"github.com/sluicehq/sluice/internal/strictyaml"
)

// The hostile-input tests of the config face: files written to cost more to
// read than they weigh. Each must be answered (accepted, or refused with an
// *Error that says why) within a bounded amount of memory. Time is not
// asserted; hostileGuard only keeps a regression from hanging the suite.

const (
	// hostileMaxAlloc is the most one Parse of the files of the
	// hostile-input issue may allocate (in total, not only at its peak).
	hostileMaxAlloc uint64 = 256 << 20
	// literalAllocPerByte bounds what reading a file may cost per byte:
	// yaml.v3 allocates up to about 280 bytes per byte for the densest
	// literal content (a node per byte), and aliases may not cost more.
	literalAllocPerByte = 300
	// hostileGuard is when to give up waiting (a failure); generous for
	// -race on a loaded machine.
	hostileGuard = 20 * time.Second
)

// parseBounded parses data and returns the bytes Parse allocated and its
// error. It fails the test if Parse has not returned within
// hostileGuard.
func parseBounded(t *testing.T, name string, data []byte) (alloc uint64, err error) {
	t.Helper()
	type result struct {
		alloc uint64
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := Parse(name, data)
		runtime.ReadMemStats(&after)
		done <- result{after.TotalAlloc - before.TotalAlloc, err}
	}()
	select {
	case r := <-done:
		return r.alloc, r.err
	case <-time.After(hostileGuard):
		t.Fatalf("Parse of a %d-byte file did not return within %v", len(data), hostileGuard)
		return 0, nil
	}
}

// aliasedReplaces returns a file of about size bytes in which one replaces
// list of n names is anchored once and reused by n rules through an alias:
// a few bytes per use, n entries each time.
func aliasedReplaces(size int) []byte {
	const perName = 190 // bytes of one target rule, one list entry and one user
	n := size / perName
	var b bytes.Buffer
	b.WriteString("domain: hostile\ndescriptors:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {key: t%d, rate_limit: {unit: second, requests_per_unit: 1, name: t%d}}\n", i, i)
	}
	b.WriteString("  - key: r0\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces: &L\n")
	for i := range n {
		fmt.Fprintf(&b, "        - name: t%d\n", i)
	}
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "  - {key: r%d, rate_limit: {unit: second, requests_per_unit: 1, replaces: *L}}\n", i)
	}
	return b.Bytes()
}

// aliasedShortReplaces returns a valid file of about size bytes in which
// every rule replaces the same ten names through an alias: aliases used as
// intended, which must be accepted.
func aliasedShortReplaces(size int) []byte {
	var b bytes.Buffer
	b.WriteString("domain: hostile\ndescriptors:\n  - key: r\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces: &L\n")
	for i := range 10 {
		fmt.Fprintf(&b, "        - name: t%d\n", i)
	}
	for i := range 10 {
		fmt.Fprintf(&b, "  - {key: t%d, rate_limit: {unit: second, requests_per_unit: 1, name: t%d}}\n", i, i)
	}
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "  - {key: r%d, rate_limit: {unit: second, requests_per_unit: 1, replaces: *L}}\n", i)
	}
	return b.Bytes()
}

// denseFlow returns a file of size bytes whose descriptors are a flow
// collection of one-letter items, open and close its brackets: about one
// YAML node per byte, the densest literal content.
func denseFlow(open, close string, size int) []byte {
	head := "domain: hostile\ndescriptors: " + open
	n := (size - len(head) - len(close) - 1) / 2
	return []byte(head + strings.Repeat("a,", n) + close + "\n")
}

// wildcards returns a valid file of about size bytes listing wildcard
// values of one key at one level.
func wildcards(size int) []byte {
	var b bytes.Buffer
	b.WriteString("domain: hostile\ndescriptors:\n")
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "  - {key: k, value: a*%d}\n", i)
	}
	return b.Bytes()
}

// manyKeys returns a file whose top-level mapping has n distinct keys,
// then the line last.
func manyKeys(n int, last string) []byte {
	var b bytes.Buffer
	b.WriteString("domain: hostile\n")
	for i := range n {
		fmt.Fprintf(&b, "k%05d: 1\n", i)
	}
	b.WriteString(last)
	return b.Bytes()
}

// laughs returns a billion-laughs file: each level is a descriptor whose
// children are ten aliases of the level below (under distinct keys, so that
// no duplicate descriptor stops the walk early), levels deep.
func laughs(levels int) []byte {
	var b bytes.Buffer
	b.WriteString("domain: hostile\ndescriptors:\n  - &l0 {key: leaf, rate_limit: {unit: second, requests_per_unit: 1}}\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "  - &l%d {key: l%d, descriptors: [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "{key: c%d, descriptors: [*l%d]}", j, i-1)
		}
		b.WriteString("]}\n")
	}
	return b.Bytes()
}

// deeplyNested returns a file whose descriptors nest depth levels deep, in
// flow style.
func deeplyNested(depth int) []byte {
	var b bytes.Buffer
	b.WriteString("domain: hostile\ndescriptors: ")
	for range depth {
		b.WriteString("[{key: k, descriptors: ")
	}
	b.WriteString("[]")
	for range depth {
		b.WriteString("}]")
	}
	b.WriteString("\n")
	return b.Bytes()
}

// deeplyNestedLists returns a file with a value of depth nested lists under
// a known key.
func deeplyNestedLists(depth int) []byte {
	return []byte("domain: hostile\ndescriptors:\n  - key: k\n    value: " + strings.Repeat("[", depth) + strings.Repeat("]", depth) + "\n")
}

// TestHostileFilesAreAnsweredInBoundedMemory parses files built to cost
// more than they weigh: each is answered, accepted or refused with an *Error
// that says why, and Parse allocates at most hostileMaxAlloc in all, and
// literalAllocPerByte per byte of the file (plus 8 MB).
func TestHostileFilesAreAnsweredInBoundedMemory(t *testing.T) {
	const (
		accepted = ""
		budget   = "expands the document past"
		tooLarge = "over the limit of 1048576"
	)
	// Under the race detector yaml.v3 is about twenty times slower: the
	// files the size cap does not refuse are read at an eighth of their
	// size, to keep the test to seconds; the bounds per byte still hold.
	size := func(n int) int { return n }
	if raceEnabled {
		size = func(n int) int { return n / 8 }
	}
	tests := []struct {
		name string
		data []byte
		want string // in the error; accepted for none
	}{
		{"replaces list aliased by every rule, 1 MB", aliasedReplaces(size(1_000_000)), budget},
		{"replaces list aliased by every rule, 1.1 MB", aliasedReplaces(1_100_000), tooLarge},
		{"replaces list aliased by every rule, 2.3 MB", aliasedReplaces(2_300_000), tooLarge},
		{"short replaces list aliased by every rule, 1 MB", aliasedShortReplaces(size(1_000_000)), accepted},
		{"100k distinct keys in one mapping", manyKeys(size(100_000), ""), `unknown key "k00000" in the file`},
		{"100k keys, the last a duplicate", manyKeys(size(100_000), "k00000: 2\n"), `duplicate key "k00000" in the file (first at line 2)`},
		{"40k wildcard descriptors at one level", wildcards(size(1_000_000)), accepted},
		{"billion laughs through descriptors", laughs(9), budget},
		{"alias inside the node it names", []byte("domain: x\ndescriptors:\n  - &d {key: k, descriptors: [*d]}\n"), "alias *d is inside the node it names"},
		{"descriptors nested 2000 deep", deeplyNested(2000), "descriptors nested deeper than 64 levels"},
		{"lists nested 9000 deep", deeplyNestedLists(9000), "value must be a string, not a list"},
		{"syntax error at the end of a 1 MB file", append(manyKeys(size(99_000), ""), "x: [\n"...), "invalid YAML"},
		{"syntax error at the end of a dense 64 KiB file", denseFlow("[", "]\nx: [", size(64<<10)), "invalid YAML"},
		// The densest literal content, a node per byte, at a quarter of
		// the size cap: its cost is per byte, which the cap bounds.
		{"flow list, 256 KiB", denseFlow("[", "]", size(strictyaml.MaxBytes/4)), "descriptor must be a mapping"},
		{"flow mapping, 256 KiB", denseFlow("[{", "}]", size(strictyaml.MaxBytes/4)), `duplicate key "a" in descriptor`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			alloc, err := parseBounded(t, "hostile.yaml", tt.data)
			t.Logf("%d bytes: %d MB allocated, error: %v", len(tt.data), alloc>>20, err)
			switch {
			case err == nil && tt.want != accepted:
				t.Errorf("accepted, want an error containing %q", tt.want)
			case err != nil && (tt.want == accepted || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %q, want one containing %q", err, tt.want)
			}
			if err != nil {
				if e, ok := errors.AsType[*Error](err); !ok || e.File != "hostile.yaml" || e.Msg == "" {
					t.Errorf("error %T %q is not an *Error naming the file", err, err)
				}
			}
			if limit := min(hostileMaxAlloc, literalAllocPerByte*uint64(len(tt.data))+8<<20); alloc > limit {
				t.Errorf("Parse of %d bytes allocated %d MB, want at most %d MB", len(tt.data), alloc>>20, limit>>20)
			}
		})
	}
}

// TestLoadRefusesFilesThatAreNotRegular puts an odd file named *.yaml in
// a config directory beside a good one: Load must refuse it at once, with
// an *Error that names it, rather than block on a FIFO or read /dev/zero
// forever.
func TestLoadRefusesFilesThatAreNotRegular(t *testing.T) {
	tests := []struct {
		name string
		make func(path string) error
		want string
		is   error
	}{
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o644) }, "a named pipe", safefile.ErrNotRegular},
		{"symlink to /dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }, "a device", safefile.ErrNotRegular},
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }, "a directory", safefile.ErrNotRegular},
		{"over the size cap", func(p string) error {
			return os.WriteFile(p, []byte("domain: big\n"+strings.Repeat("#", strictyaml.MaxBytes)), 0o644)
		}, fmt.Sprintf("%d bytes, over the limit of %d", strictyaml.MaxBytes+12, strictyaml.MaxBytes), safefile.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"a.yaml": "domain: fine\n"})
			odd := filepath.Join(dir, "odd.yaml")
			if err := tt.make(odd); err != nil {
				t.Skipf("cannot make a %s: %v", tt.name, err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := Load(dir)
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(hostileGuard):
				t.Fatalf("Load of a directory with a %s did not return within %v", tt.name, hostileGuard)
			}
			want := odd + ": config: cannot read: " + tt.want
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Load = %v, want an error starting %q", err, want)
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("Load error %v does not wrap %v", err, tt.is)
			}
			if e, ok := errors.AsType[*Error](err); !ok || e.File != odd {
				t.Errorf("Load error %T %v is not an *Error naming %s", err, err, odd)
			}
			if files, err := Files(dir); err != nil || !slices.Contains(files, odd) {
				t.Errorf("Files(dir) = %v, %v; want it to list %s, so that a watcher sees it", files, err, odd)
			}
		})
	}
}

// TestLoadContextGivesUpWhenTheContextEnds checks that the loader obeys
// its context: a cancelled load reads nothing.
func TestLoadContextGivesUpWhenTheContextEnds(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.yaml": "domain: fine\n"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := LoadContext(ctx, dir)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("LoadContext with a cancelled context = %v, want context.Canceled", err)
	}
}

// TestLoadRefusesAConfigOverItsTotalSize fills a directory with 17 files,
// each one byte under MaxFileBytes: every file passes the per-file cap but
// together they are over MaxTotalBytes, and LoadContext, which any library
// caller uses, must refuse them with an *Error naming the directory, the
// total and the cap.
func TestLoadRefusesAConfigOverItsTotalSize(t *testing.T) {
	const n = 17
	files := make(map[string]string, n)
	for i := range n {
		head := fmt.Sprintf("domain: filler%02d\n", i)
		line := "# " + strings.Repeat("x", 77) + "\n"
		body := head + strings.Repeat(line, (MaxFileBytes-1-len(head))/len(line))
		body += "#" + strings.Repeat("x", MaxFileBytes-1-len(body)-2) + "\n"
		if len(body) != MaxFileBytes-1 {
			t.Fatalf("file of %d bytes, want %d", len(body), MaxFileBytes-1)
		}
		files[fmt.Sprintf("f%02d.yaml", i)] = body
	}
	dir := writeFiles(t, files)
	c, err := LoadContext(context.Background(), dir)
	if err == nil {
		t.Fatalf("LoadContext accepted %d files of %d bytes (%d in all, over MaxTotalBytes %d) with %d domains",
			n, MaxFileBytes-1, n*(MaxFileBytes-1), MaxTotalBytes, len(c.Domains()))
	}
	total := (MaxTotalBytes/(MaxFileBytes-1) + 1) * (MaxFileBytes - 1)
	for _, want := range []string{dir + ": config: ", fmt.Sprintf("%d bytes in all", total), fmt.Sprintf("over the limit of %d", MaxTotalBytes)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("LoadContext = %v, want an error containing %q", err, want)
		}
	}
	if e, ok := errors.AsType[*Error](err); !ok || e.File != dir {
		t.Errorf("LoadContext error %T %v is not an *Error naming %s", err, err, dir)
	}
}
