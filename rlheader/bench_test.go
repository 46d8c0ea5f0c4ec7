package rlheader

import (
	"testing"
	"time"
)

var (
	benchPolicies = []Policy{
		{Name: "permin", Quota: 50, Window: time.Minute},
		{Name: "perhr", Quota: 1000, Window: time.Hour, PartitionKey: []byte("user-42")},
	}
	benchStatuses = []Status{
		{Name: "permin", Remaining: 49, Reset: 60 * time.Second},
		{Name: "perhr", Remaining: 999, Reset: 3600 * time.Second, PartitionKey: []byte("user-42")},
	}
	sinkBytes []byte
)

func BenchmarkAppendPolicies(b *testing.B) {
	b.Run("policies=2/reused", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 128)
		for b.Loop() {
			buf = AppendPolicies(buf[:0], benchPolicies...)
		}
		sinkBytes = buf
	})
	b.Run("policies=2/nil", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkBytes = AppendPolicies(nil, benchPolicies...)
		}
	})
}

func BenchmarkAppendStatuses(b *testing.B) {
	b.Run("statuses=2/reused", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 128)
		for b.Loop() {
			buf = AppendStatuses(buf[:0], benchStatuses...)
		}
		sinkBytes = buf
	})
	b.Run("statuses=1/reused", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 128)
		for b.Loop() {
			buf = AppendStatuses(buf[:0], benchStatuses[0])
		}
		sinkBytes = buf
	})
}

func BenchmarkAppendRetryAfter(b *testing.B) {
	b.ReportAllocs()
	buf := make([]byte, 0, 16)
	for b.Loop() {
		buf = AppendRetryAfter(buf[:0], 29500*time.Millisecond)
	}
	sinkBytes = buf
}

func BenchmarkParseStatuses(b *testing.B) {
	lines := []string{string(AppendStatuses(nil, benchStatuses...))}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseStatuses(lines); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseRetryAfter(b *testing.B) {
	now := time.Unix(1700000000, 0)
	for _, v := range []string{"120", "Tue, 14 Nov 2023 22:13:25 GMT"} {
		b.Run("value="+v[:3], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := ParseRetryAfter(v, now); !ok {
					b.Fatal("rejected")
				}
			}
		})
	}
}
