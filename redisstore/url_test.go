package redisstore_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/redisstore"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		url      string
		addrs    []string
		user     string
		password string
		db       int
		tls      bool
		single   bool
		master   string
	}{
		{url: "redis://localhost:6379", addrs: []string{"localhost:6379"}, single: true},
		{url: "redis://10.0.0.1", addrs: []string{"10.0.0.1:6379"}, single: true},
		{url: "redis://u:p%40ss@h:7000/3", addrs: []string{"h:7000"}, user: "u", password: "p@ss", db: 3, single: true},
		{url: "rediss://:secret@h:6380?db=2", addrs: []string{"h:6380"}, password: "secret", db: 2, tls: true, single: true},
		{url: "redis+cluster://a:7000,b:7001,c:7002", addrs: []string{"a:7000", "b:7001", "c:7002"}},
		{url: "rediss+cluster://u:p@a:7000,b:7001?dial_timeout=2s", addrs: []string{"a:7000", "b:7001"}, user: "u", password: "p", tls: true},
		{url: "redis+sentinel://s1:26379,s2:26379/mymaster", addrs: []string{"s1:26379", "s2:26379"}, master: "mymaster"},
		{url: "redis+sentinel://:pw@s1:26379/mymaster?db=1", addrs: []string{"s1:26379"}, password: "pw", master: "mymaster", db: 1},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			opt, err := redisstore.ParseURL(tt.url)
			if err != nil {
				t.Fatalf("ParseURL: %v", err)
			}
			if !slices.Equal(opt.InitAddress, tt.addrs) {
				t.Errorf("InitAddress = %v, want %v", opt.InitAddress, tt.addrs)
			}
			if opt.Username != tt.user || opt.Password != tt.password {
				t.Errorf("user, password = %q, %q; want %q, %q", opt.Username, opt.Password, tt.user, tt.password)
			}
			if opt.SelectDB != tt.db {
				t.Errorf("SelectDB = %d, want %d", opt.SelectDB, tt.db)
			}
			if (opt.TLSConfig != nil) != tt.tls {
				t.Errorf("TLS = %v, want %v", opt.TLSConfig != nil, tt.tls)
			}
			if opt.ForceSingleClient != tt.single {
				t.Errorf("ForceSingleClient = %v, want %v", opt.ForceSingleClient, tt.single)
			}
			if opt.Sentinel.MasterSet != tt.master {
				t.Errorf("MasterSet = %q, want %q", opt.Sentinel.MasterSet, tt.master)
			}
			if !opt.DisableCache {
				t.Errorf("DisableCache = false, want true")
			}
		})
	}
}

func TestParseURLErrors(t *testing.T) {
	tests := []struct{ url, want string }{
		{"localhost:6379", "want redis://host:port"},
		{"http://h:1", `scheme "http"`},
		{"redis+ring://h:1", `scheme "redis+ring"`},
		{"redis://a:1,b:2", "use redis+cluster:// or redis+sentinel://"},
		{"redis+cluster://a:1,,b:2", "empty host"},
		{"redis+cluster://a:1/0", "no database path"},
		{"redis+sentinel://a:1", "master-name"},
		{"redis+sentinel://a:1/m/x", "master-name"},
		{"redis://h:1/notanumber", "invalid database number"},
		{"redis://h:1?db=%zz", "invalid URL escape"},
	}
	for _, tt := range tests {
		_, err := redisstore.ParseURL(tt.url)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseURL(%q) error = %v, want one containing %q", tt.url, err, tt.want)
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"redis://h:1/2", "redis+cluster://a:1,b:2", "redis+sentinel://:p@s:1/m?db=1", "rediss://u@h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		opt, err := redisstore.ParseURL(s) // must not panic
		if err == nil && len(opt.InitAddress) == 0 {
			t.Errorf("ParseURL(%q) gave no address and no error", s)
		}
	})
}

func TestParseURLHidesPassword(t *testing.T) {
	for _, u := range []string{"redis://:s3cret@h:1/notanumber", "redis://u:s3cret@a:1,b:2", "http://u:s3cret@h"} {
		_, err := redisstore.ParseURL(u)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseURL(%q) error %v shows the password", u, err)
		}
	}
}
