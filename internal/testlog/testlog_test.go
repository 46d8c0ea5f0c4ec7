package testlog_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/testlog"
)

func TestBufferKeepsEveryLineWrittenConcurrently(t *testing.T) {
	var b testlog.Buffer
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { fmt.Fprintf(&b, "line %d\n", i) })
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 50 {
		t.Fatalf("%d lines, want 50", n)
	}
	b.Reset()
	if b.String() != "" {
		t.Fatalf("after Reset: %q", b.String())
	}
}
