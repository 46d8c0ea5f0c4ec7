package daemon

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The names that are not files open what they name; a file is created if
// need be and appended to, keeping what it held.
func TestOpenAccessLogNamesAStreamOrAFile(t *testing.T) {
	var stderr bytes.Buffer
	for where, want := range map[string]io.Writer{"": &stderr, "stderr": &stderr, "stdout": os.Stdout, "off": nil} {
		w, closeLog, err := OpenAccessLog(where, &stderr)
		if err != nil || w != want {
			t.Errorf("%q: %v, %v; want %v", where, w, err, want)
		}
		closeLog()
	}
	path := filepath.Join(t.TempDir(), "access.log")
	writeString(t, path, "before\n")
	w, closeLog, err := OpenAccessLog(path, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "after\n")
	closeLog()
	if b, _ := os.ReadFile(path); string(b) != "before\nafter\n" {
		t.Errorf("the file holds %q, want what it held and the new line", b)
	}
	if _, _, err := OpenAccessLog(filepath.Join(path, "x"), &stderr); err == nil || !strings.HasPrefix(err.Error(), "access log: ") {
		t.Errorf("a file under a file: %v, want an access log error", err)
	}
}

// A reopened file is the one at the path now: after a rename, lines go
// to a new file; when the path cannot be opened, to the old one still.
func TestReopenedAccessLogWritesTheFileAtThePath(t *testing.T) {
	path, w := tempAccessLog(t)
	lf := w.(*logFile)
	io.WriteString(w, "first\n")
	rotate(t, path)
	if err := lf.reopen(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "second\n")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := lf.reopen(); err == nil {
		t.Fatal("reopening a directory: no error")
	}
	io.WriteString(w, "third\n")
	if b, _ := os.ReadFile(path + ".1"); string(b) != "first\n" {
		t.Errorf("the rotated file holds %q, want the first line alone", b)
	}
	if lf.f.Name() != path {
		t.Errorf("writing %s after a failed reopen, want the file opened before", lf.f.Name())
	}
}

// tempAccessLog opens an access log at a path in a fresh directory; it is
// closed when the test ends.
func tempAccessLog(t *testing.T) (path string, w io.Writer) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "access.log")
	w, closeLog, err := OpenAccessLog(path, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeLog)
	return path, w
}

// rotate moves the file at path to path.1, as log rotation does.
func rotate(t *testing.T, path string) {
	t.Helper()
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
}

// An access log start-up could not open is refused without creating it;
// the stream names and a file it could append to pass.
func TestCheckAccessLogRefusesWhatCannotBeAppendedTo(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeString(t, file, "")
	for _, ok := range []string{"", "stderr", "stdout", "off", file, filepath.Join(dir, "new.log")} {
		if err := CheckAccessLog(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for where, want := range map[string]string{
		filepath.Join(dir, "none", "a.log"): "no such file",
		filepath.Join(file, "a.log"):        "not a directory",
		dir:                                 "not a regular file",
	} {
		if err := CheckAccessLog(where); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", where, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new.log")); err == nil {
		t.Error("checking created the file")
	}
}

func writeString(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
