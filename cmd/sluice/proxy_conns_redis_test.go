package main

import (
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
)

// Two `sluice proxy` on one Redis share a conns limit: together they admit
// exactly max requests of a key in flight. When Redis goes down, the
// failure mode applies to conns too: closed refuses with conn_status,
// open admits, local counts in the process meanwhile.
func TestProxyConnsSharedOnRedis(t *testing.T) {
	redis := redistest.StartServer(t)
	upURL, entered, release := holdingUpstream(t, "/slow", 8)
	defer release()
	name := "c" + strconv.FormatInt(time.Now().UnixNano(), 36)
	path := filepath.Join(t.TempDir(), "proxy.yaml")
	writeFile(t, path, "upstream: "+upURL+"\nconn_status: 503\nconns: [{name: "+name+", key: global, max: 2}]\nroutes: [{name: all, match: /, conns: ["+name+"]}]\n")
	store := "redis://" + redis.Addr
	closed := launchProxy(t, "-config", path, "-store", store, "-failure-mode", "closed")
	open := launchProxy(t, "-config", path, "-store", store, "-failure-mode", "open")
	local := launchProxy(t, "-config", path, "-store", store, "-failure-mode", "local")
	hold := func(p *proxyRun) {
		go http.Get(p.url + "/slow")
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("a held request did not reach the upstream")
		}
	}
	hold(closed)
	hold(open)
	for i, p := range []*proxyRun{closed, open, local} {
		if got := getStatus(t, p.url+"/"); got != 503 {
			t.Fatalf("third request in flight, on proxy %d: %d; want 503 (2 held across both)", i, got)
		}
	}
	redis.Kill()
	if got := getStatus(t, closed.url+"/"); got != 503 {
		t.Errorf("Redis down, failure mode closed: %d; want 503", got)
	}
	if got := getStatus(t, open.url+"/"); got != 200 {
		t.Errorf("Redis down, failure mode open: %d; want 200", got)
	}
	hold(local)
	hold(local)
	if got := getStatus(t, local.url+"/"); got != 503 {
		t.Errorf("Redis down, failure mode local, 2 in flight in the process: %d; want 503", got)
	}
}
