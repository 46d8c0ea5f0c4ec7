package redistest_test

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func TestServerKillRestart(t *testing.T) {
	t.Parallel()
	s := redistest.StartServer(t)
	if got := s.Do(t, "PING"); got != "PONG" {
		t.Fatalf("PING = %q, want PONG", got)
	}
	if got := s.Do(t, "SET", "k", "v"); got != "OK" {
		t.Fatalf("SET = %q, want OK", got)
	}
	if got := s.Do(t, "EXISTS", "k"); got != "1" {
		t.Fatalf("EXISTS k = %q, want 1", got)
	}

	pid := s.Pid()
	s.Kill()
	if s.Pid() != 0 {
		t.Errorf("Pid after Kill = %d, want 0", s.Pid())
	}
	if runtime.GOOS == "linux" {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			t.Errorf("process %d still exists after Kill", pid)
		}
	}
	if out, err := s.Exec("PING"); err == nil {
		t.Fatalf("PING after Kill = %q, want an error", out)
	}

	s.Restart(t)
	if got := s.Do(t, "PING"); got != "PONG" {
		t.Fatalf("PING after Restart = %q, want PONG", got)
	}
	if got := s.Do(t, "EXISTS", "k"); got != "0" {
		t.Fatalf("EXISTS k after Restart = %q, want 0 (no persistence)", got)
	}
	if s.Pid() == pid {
		t.Errorf("Restart kept pid %d", pid)
	}
}

func TestExecReplies(t *testing.T) {
	t.Parallel()
	s := redistest.Single(t)
	if s != redistest.Single(t) {
		t.Fatal("Single returned two servers")
	}
	s.Do(t, "DEL", "TestExecReplies:list") // the server outlives a run of -count=N
	s.Do(t, "RPUSH", "TestExecReplies:list", "a", "b")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"GET", "TestExecReplies:missing"}, ""},
		{[]string{"LRANGE", "TestExecReplies:list", "0", "-1"}, "a\nb"},
		{[]string{"LRANGE", "TestExecReplies:missing", "0", "-1"}, ""},
		{[]string{"EVAL", "return {1, {'x', 2}}", "0"}, "1\nx\n2"},
		{[]string{"SCRIPT", "FLUSH"}, "OK"},
	} {
		if got := s.Do(t, c.args...); got != c.want {
			t.Errorf("%v = %q, want %q", c.args, got, c.want)
		}
	}
	if _, err := s.Exec("NOSUCHCOMMAND"); err == nil || !strings.Contains(err.Error(), "ERR unknown command") {
		t.Errorf("NOSUCHCOMMAND: err = %v, want ERR unknown command", err)
	}
	if got := s.Do(t, "MEMORY", "USAGE", "TestExecReplies:list"); got == "" || strings.Trim(got, "0123456789") != "" {
		t.Errorf("MEMORY USAGE = %q, want a number", got)
	}
}

func TestStartServerExtraArgs(t *testing.T) {
	t.Parallel()
	s := redistest.StartServer(t, "--maxmemory", "2mb")
	if got := s.Do(t, "CONFIG", "GET", "maxmemory"); got != "maxmemory\n2097152" {
		t.Fatalf("CONFIG GET maxmemory = %q", got)
	}
}

// TestClusterKeySlots checks the key-slot fixtures of the standards (§7 E,
// case 44) against a live cluster.
func TestClusterKeySlots(t *testing.T) {
	t.Parallel()
	c := redistest.SharedCluster(t)
	if c != redistest.SharedCluster(t) {
		t.Fatal("SharedCluster returned two clusters")
	}
	if len(c.Nodes) != 3 || len(c.Addrs) != 3 {
		t.Fatalf("%d nodes, %d addresses, want 3", len(c.Nodes), len(c.Addrs))
	}
	for _, n := range c.Nodes {
		if info := n.Do(t, "CLUSTER", "INFO"); !strings.Contains(info, "cluster_state:ok") {
			t.Errorf("%s: CLUSTER INFO:\n%s", n.Addr, info)
		}
	}
	for key, want := range map[string]string{
		"123456789":            "12739",
		"somekey":              "11058",
		"foo":                  "12182",
		"{user1000}.following": "3443",
		"{user1000}.followers": "3443",
		"foo{}{bar}":           "8363",
		"foo{{bar}}zap":        "4015",
		"foo{bar}{zap}":        "5061",
	} {
		if got := c.Nodes[0].Do(t, "CLUSTER", "KEYSLOT", key); got != want {
			t.Errorf("CLUSTER KEYSLOT %s = %s, want %s", key, got, want)
		}
	}

	// MasterOf names the node that takes the key; another node redirects.
	m := c.MasterOf(t, "{TestClusterKeySlots}.k")
	if got := m.Do(t, "SET", "{TestClusterKeySlots}.k", "v"); got != "OK" {
		t.Fatalf("SET on its master = %q", got)
	}
	for _, n := range c.Nodes {
		if n == m {
			continue
		}
		if _, err := n.Exec("GET", "{TestClusterKeySlots}.k"); err == nil || !strings.Contains(err.Error(), "MOVED") {
			t.Errorf("GET on %s, not its master: err = %v, want MOVED", n.Addr, err)
		}
	}
}

func TestClusterWithReplicas(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3, 1)
	if len(c.Nodes) != 6 {
		t.Fatalf("%d nodes, want 6", len(c.Nodes))
	}
	for i, n := range c.Nodes {
		role := n.Do(t, "ROLE")
		want := "master"
		if i >= 3 {
			want = "slave"
		}
		if !strings.HasPrefix(role, want+"\n") {
			t.Errorf("node %d (%s): ROLE = %q, want %s", i, n.Addr, role, want)
		}
	}

	// A replica killed and restarted keeps its nodes.conf: it comes back
	// as the replica it was and syncs with its master again.
	r := c.Nodes[5]
	r.Kill()
	r.Restart(t)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.Do(t, "INFO", "replication"), "master_link_status:up") {
		if time.Now().After(deadline) {
			t.Fatalf("restarted replica %s did not sync again:\n%s", r.Addr, r.Do(t, "INFO", "replication"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if role := r.Do(t, "ROLE"); !strings.HasPrefix(role, "slave\n") {
		t.Errorf("restarted replica: ROLE = %q", role)
	}
}

// TestMissingRedis runs this test binary again with redis-server pointed at a
// file that does not exist: a test that needs Redis must skip, saying what to
// install, or fail when SLUICE_REQUIRE_REDIS=1.
func TestMissingRedis(t *testing.T) {
	t.Parallel()
	run := func(require string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestServerKillRestart$", "-test.v")
		cmd.Env = append(os.Environ(),
			redistest.ServerEnv+"=/nonexistent/redis-server",
			redistest.RequireEnv+"="+require)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := run("")
	if err != nil || !strings.Contains(out, "--- SKIP: TestServerKillRestart") ||
		!strings.Contains(out, "apt-get install redis-server redis-tools") {
		t.Errorf("without Redis: err = %v, want a skip that says what to install; output:\n%s", err, out)
	}
	out, err = run("1")
	if err == nil || !strings.Contains(out, "--- FAIL: TestServerKillRestart") ||
		!strings.Contains(out, "apt-get install redis-server redis-tools") {
		t.Errorf("without Redis, %s=1: err = %v, want a failure that says what to install; output:\n%s",
			redistest.RequireEnv, err, out)
	}
}
