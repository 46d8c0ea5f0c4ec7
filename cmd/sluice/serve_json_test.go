package main

import (
	"io"
	"strings"
	"testing"
)

// -json-max-bytes-per-peer and -json-body-min-rate (and their variables)
// reach the service's config: 0 for the rate is off (-1 to the service),
// and a peer's share outside 1 MiB to the whole budget is refused naming
// the flag.
func TestServeJSONBodyBoundsReachTheService(t *testing.T) {
	for _, tt := range []struct {
		args             []string
		env              string
		perPeer, minRate int64
	}{
		{nil, "", 0, 1024},
		{[]string{"-json-max-bytes-per-peer", "2m", "-json-body-min-rate", "0"}, "", 2 << 20, -1},
		{[]string{"-json-body-min-rate", "4k"}, "", 0, 4096},
		{nil, "3m", 3 << 20, 1024},
	} {
		if tt.env != "" {
			t.Setenv("JSON_MAX_BYTES_PER_PEER", tt.env)
		}
		s, code, done := parseServeFlags(tt.args, io.Discard, io.Discard)
		if done || code != 0 {
			t.Fatalf("%v: parse: code %d, done %v", tt.args, code, done)
		}
		if err := s.checkOptions(); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		cfg := s.serviceConfig()
		if cfg.MaxJSONBytesPerPeer != tt.perPeer || cfg.JSONBodyMinRate != tt.minRate {
			t.Errorf("%v %s: MaxJSONBytesPerPeer %d, JSONBodyMinRate %d; want %d, %d", tt.args, tt.env, cfg.MaxJSONBytesPerPeer, cfg.JSONBodyMinRate, tt.perPeer, tt.minRate)
		}
	}
	for _, args := range [][]string{
		{"-json-max-bytes-per-peer", "512k"},
		{"-json-max-bytes-per-peer", "3m", "-json-max-bytes-in-flight", "2m"},
	} {
		s, code, done := parseServeFlags(args, io.Discard, io.Discard)
		if done || code != 0 {
			t.Fatalf("%v: parse: code %d, done %v", args, code, done)
		}
		if err := s.checkOptions(); err == nil || !strings.Contains(err.Error(), "-json-max-bytes-per-peer") {
			t.Errorf("%v: %v, want an error naming -json-max-bytes-per-peer", args, err)
		}
	}
}
