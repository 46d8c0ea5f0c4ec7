package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// StartSentinel starts a Redis Sentinel on a free loopback port that
// monitors master under the name masterName (quorum 1), and waits until it
// answers. t.Cleanup stops it. Call it from the test's goroutine: it skips
// or fails t when Redis is missing, as StartServer does.
func StartSentinel(t testing.TB, master *Server, masterName string) *Server {
	t.Helper()
	tl := need(t, false)
	dir := t.TempDir()
	s := &Server{tl: tl, dir: dir, logPath: filepath.Join(dir, "redis.log")}
	err := s.startOnFreePort(false, func() ([]string, error) {
		// Sentinel rewrites its config file, so it gets one of its own.
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %s 2000\n",
			s.Port, dir, masterName, master.Port, masterName)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return nil, fmt.Errorf("redistest: %w", err)
		}
		return []string{conf, "--sentinel"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
