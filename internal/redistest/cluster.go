package redistest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// clusterTimeout bounds `redis-cli --cluster create` and, separately, the
// wait for the cluster to settle after it.
const clusterTimeout = 30 * time.Second

// Cluster is a Redis Cluster of redis-server processes on loopback ports,
// each with a cluster node timeout of 2 seconds (so a failover takes a few
// seconds). Its fields are read-only.
type Cluster struct {
	// Addrs are the addresses of all the nodes, in the order of Nodes: the
	// seeds a cluster client needs.
	Addrs []string
	// Nodes are the nodes: the masters as created first, then the
	// replicas. A failover changes the roles, not this order.
	Nodes []*Server
}

// StartCluster starts a dedicated cluster of masters (at least 3) with
// replicasPerMaster replicas each, built with `redis-cli --cluster create`,
// and returns once every node reports cluster_state:ok with all 16384 slots
// assigned, sees every other node, and every replica's link to its master is
// up. t.Cleanup stops it. Call it from the test's goroutine: it skips or
// fails t when redis-server or redis-cli is missing, and fails t when the
// cluster does not form in time.
func StartCluster(t testing.TB, masters, replicasPerMaster int) *Cluster {
	t.Helper()
	tl := need(t, true)
	if masters < 3 || replicasPerMaster < 0 {
		t.Fatalf("redistest: StartCluster(%d, %d): need at least 3 masters and no negative replicas",
			masters, replicasPerMaster)
	}
	dirs := make([]string, masters*(1+replicasPerMaster))
	for i := range dirs {
		dirs[i] = t.TempDir() // before Cleanup(stop): the nodes stop before their directories go
	}
	c, err := newCluster(tl, dirs, masters, replicasPerMaster)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	return c
}

// newCluster starts one node in each of dirs and makes them a cluster. On
// failure it stops every node it started.
func newCluster(tl tools, dirs []string, masters, replicas int) (c *Cluster, err error) {
	c = &Cluster{Nodes: make([]*Server, len(dirs))}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	for i, dir := range dirs {
		wg.Go(func() { c.Nodes[i], errs[i] = newServer(tl, dir, true, nil) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	for _, n := range c.Nodes {
		c.Addrs = append(c.Addrs, n.Addr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	out, err := exec.CommandContext(ctx, tl.cli, args...).CombinedOutput()
	if err != nil {
		return c, fmt.Errorf("redistest: redis-cli %s: %v\n%s%s", strings.Join(args, " "), err, out, c.logs())
	}
	roles, err := c.waitReady(masters, replicas, time.Now().Add(clusterTimeout))
	if err != nil {
		return c, fmt.Errorf("%v\n--- redis-cli --cluster create said:\n%s%s", err, out, c.logs())
	}
	// Masters first, as the documentation of Nodes promises.
	var ms, rs []*Server
	for _, n := range c.Nodes {
		if roles[n.Addr] == "master" {
			ms = append(ms, n)
		} else {
			rs = append(rs, n)
		}
	}
	c.Nodes = append(ms, rs...)
	for i, n := range c.Nodes {
		c.Addrs[i] = n.Addr
	}
	return c, nil
}

// stop stops every node.
func (c *Cluster) stop() {
	for _, n := range c.Nodes {
		if n != nil {
			n.stop()
		}
	}
}

// logs returns every node's log, for an error message.
func (c *Cluster) logs() string {
	var b strings.Builder
	for _, n := range c.Nodes {
		if n != nil {
			fmt.Fprintf(&b, "\n--- redis-server %s log:\n%s", n.Addr, n.readLog())
		}
	}
	return b.String()
}

// waitReady waits until every node sees a healthy cluster of the expected
// shape, and returns the roles ("master" or "slave") by address.
func (c *Cluster) waitReady(masters, replicas int, deadline time.Time) (map[string]string, error) {
	for {
		roles, err := c.check(masters, replicas)
		if err == nil {
			return roles, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("redistest: the cluster did not become ready within %v: %w", clusterTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// check returns an error saying what is not ready yet, or the roles.
func (c *Cluster) check(masters, replicas int) (map[string]string, error) {
	var roles map[string]string
	for _, n := range c.Nodes {
		info, err := command(n.Addr, time.Second, "CLUSTER", "INFO")
		if err != nil {
			return nil, err
		}
		for _, want := range []string{
			"cluster_state:ok",
			"cluster_slots_assigned:16384",
			"cluster_slots_ok:16384",
			"cluster_known_nodes:" + strconv.Itoa(len(c.Nodes)),
		} {
			if !strings.Contains(info+"\r\n", want+"\r\n") {
				return nil, fmt.Errorf("%s: CLUSTER INFO lacks %s", n.Addr, want)
			}
		}
		nodes, err := clusterNodes(n.Addr)
		if err != nil {
			return nil, err
		}
		var nm, nr int
		r := make(map[string]string)
		for _, cn := range nodes {
			if cn.flags["fail"] || cn.flags["fail?"] || cn.flags["handshake"] || cn.flags["noaddr"] || !cn.connected {
				return nil, fmt.Errorf("%s: CLUSTER NODES shows %s unhealthy: %s", n.Addr, cn.addr, cn.line)
			}
			switch {
			case cn.flags["master"] && len(cn.slots) > 0:
				nm++
				r[cn.addr] = "master"
			case cn.flags["slave"]:
				nr++
				r[cn.addr] = "slave"
			}
		}
		if nm != masters || nr != masters*replicas {
			return nil, fmt.Errorf("%s: CLUSTER NODES shows %d masters with slots and %d replicas, want %d and %d",
				n.Addr, nm, nr, masters, masters*replicas)
		}
		if r[n.Addr] == "slave" {
			repl, err := command(n.Addr, time.Second, "INFO", "replication")
			if err != nil {
				return nil, err
			}
			if !strings.Contains(repl, "master_link_status:up\r\n") {
				return nil, fmt.Errorf("%s: replica's link to its master is not up", n.Addr)
			}
		}
		if roles == nil {
			roles = r
		}
	}
	return roles, nil
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	line      string
	addr      string // "ip:port", without the bus port
	flags     map[string]bool
	connected bool
	slots     [][2]int // inclusive ranges
}

// clusterNodes asks addr for CLUSTER NODES and parses it:
// <id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent> <pong-recv>
// <config-epoch> <link-state> <slot or range>...
func clusterNodes(addr string) ([]clusterNode, error) {
	out, err := command(addr, time.Second, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	var nodes []clusterNode
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("%s: CLUSTER NODES line %q: too few fields", addr, line)
		}
		cn := clusterNode{line: line, flags: make(map[string]bool), connected: f[7] == "connected"}
		cn.addr, _, _ = strings.Cut(f[1], "@")
		for fl := range strings.SplitSeq(f[2], ",") {
			cn.flags[fl] = true
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") { // a slot being imported or migrated
				continue
			}
			lo, hi, isRange := strings.Cut(s, "-")
			a, err1 := strconv.Atoi(lo)
			b := a
			var err2 error
			if isRange {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("%s: CLUSTER NODES line %q: bad slot %q", addr, line, s)
			}
			cn.slots = append(cn.slots, [2]int{a, b})
		}
		nodes = append(nodes, cn)
	}
	return nodes, nil
}

// MasterOf returns the node that serves key's slot, as the first node that
// answers sees it: where to look for a key with EXISTS or MEMORY USAGE, or
// which node to Kill to fail over a key's master. It fails t if no node
// answers or none serves the slot. Call it from the test's goroutine.
func (c *Cluster) MasterOf(t testing.TB, key string) *Server {
	t.Helper()
	var errs []error
	for _, n := range c.Nodes {
		slotText, err := n.Exec("CLUSTER", "KEYSLOT", key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		slot, err := strconv.Atoi(slotText)
		if err != nil {
			t.Fatalf("redistest: CLUSTER KEYSLOT %q = %q", key, slotText)
		}
		nodes, err := clusterNodes(n.Addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, cn := range nodes {
			if !cn.flags["master"] {
				continue
			}
			for _, r := range cn.slots {
				if r[0] <= slot && slot <= r[1] {
					for _, m := range c.Nodes {
						if m.Addr == cn.addr {
							return m
						}
					}
					t.Fatalf("redistest: slot %d of %q is served by %s, not a node of this cluster", slot, key, cn.addr)
				}
			}
		}
		t.Fatalf("redistest: %s sees no master serving slot %d of %q", n.Addr, slot, key)
	}
	t.Fatalf("redistest: no node of the cluster answers: %v", errors.Join(errs...))
	return nil
}
