package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/memstore"
)

// With Redis or PostgreSQL, -memory-max-bytes is the budget of the store
// that failure mode local decides on while the store fails, and the
// start-up line of what is not acted on no longer names it: before, that
// store had memstore's default 256 MiB whatever the flag said.
func TestServeFailureLocalStoreHoldsMemoryMaxBytes(t *testing.T) {
	for _, store := range []string{"redis://127.0.0.1:1", "postgres://u:p@127.0.0.1:1/db"} {
		t.Run(strings.SplitN(store, ":", 2)[0], func(t *testing.T) {
			s, code, done := parseServeFlags([]string{"-store", store, "-failure-mode", "local", "-memory-max-bytes", "1m"}, &bytes.Buffer{}, &bytes.Buffer{})
			if done {
				t.Fatalf("parse: exit %d", code)
			}
			s.o.remote.migrate = false
			var logs testlog.Buffer
			st, err := openServeStore(context.Background(), &s.o, true, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			local, ok := findPolicy(t, st).Local.(*memstore.Store)
			if !ok {
				t.Fatalf("failure policy's Local is %T, want *memstore.Store", findPolicy(t, st).Local)
			}
			if got := local.Stats().MaxBytes; got != 1<<20 {
				t.Errorf("-memory-max-bytes 1m: the local store's budget is %d bytes, want %d", got, 1<<20)
			}
			for _, f := range mootFlags(s.fs, &s.o) {
				if f == "-memory-max-bytes" {
					t.Errorf("-memory-max-bytes named as not acted on with %s", store)
				}
			}
		})
	}
}
