package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

func TestReadReplay(t *testing.T) {
	in := "timestamp,key,cost\n# a comment\n\n2025-01-01T00:00:00Z,alice\n1735689600.5, bob ,3\n1735689600.5 alice\n2025-01-01T00:00:01.25+00:00,carol,1\n"
	p, err := ReadReplay(strings.NewReader(in), "in.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{{1735689600e9, 0, 1}, {1735689600e9 + 5e8, 1, 3}, {1735689600e9 + 5e8, 0, 1}, {1735689601e9 + 25e7, 2, 1}}
	if len(p.evs) != len(want) {
		t.Fatalf("got %d events, want %d", len(p.evs), len(want))
	}
	for i := range want {
		if p.evs[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, p.evs[i], want[i])
		}
	}
	if p.Key(1) != "bob" {
		t.Errorf("key 1 = %q, want bob", p.Key(1))
	}
}

func TestReadReplayErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", "no arrivals: the file is empty"},
		{"comments only", "# nothing\n\n", "no arrivals"},
		{"header only", "timestamp,key\n", "no arrivals"},
		{"bad timestamp", "1735689600,a\n17356x9601,b\n", "line 2, column 1: bad timestamp \"17356x9601\""},
		{"bad rfc3339", "2025-13-01T00:00:00Z,a\n", "line 1, column 1: bad timestamp"},
		{"bad cost", "1735689600,a,0\n", "line 1, column 14: cost \"0\" must be a whole number"},
		{"bad cost spaces", "1735689600 a  x\n", "line 1, column 15: cost \"x\""},
		{"empty key", "1735689600, ,1\n", "line 1, column 12: key must have 1 to"},
		{"fourth field", "1735689600,a,1,z\n", "line 1, column 16: unexpected fourth field"},
		{"one field", "\n1735689600\n", "line 2: want timestamp,key[,cost], got 1 field(s)"},
		{"unsorted", "1735689600,a\n1735689601,a\n1735689600.5,b\n", "line 3, column 1: timestamp 1735689600.5 is before the previous line's 1735689601: the file must be sorted by time"},
		{"billion years", "1735689600,a\n31557600000000000,a\n", "line 2, column 1: timestamp 31557600000000000 is out of range: instants must fall between 1677 and 2262"},
		{"billion years rfc3339", "9999-01-01T00:00:00Z,a\n", "out of range"},
		{"too many decimals", "1735689600.0000000001,a\n", "more than 9 decimal places"},
	}
	for _, tt := range tests {
		_, err := ReadReplay(strings.NewReader(tt.in), "f.csv")
		if err == nil {
			t.Errorf("%s: no error, want %q", tt.name, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "sim: f.csv: ") {
			t.Errorf("%s: error %q, want it to start with \"sim: f.csv: \" and contain %q", tt.name, err, tt.want)
		}
	}
}

func TestReplayRun(t *testing.T) {
	var b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&b, "1735689600.%03d,k\n", i)
	}
	p, err := ReadReplay(strings.NewReader(b.String()), "burst.txt")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(Config{Rate: 100, Burst: 20}, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := byName(t, r, sluice.SlidingLog).Admitted; got != 100 {
		t.Errorf("sliding log admitted %d of a burst of 300, want 100", got)
	}
	if r.Requests != 300 || r.Keys != 1 {
		t.Errorf("requests %d keys %d, want 300 and 1", r.Requests, r.Keys)
	}
}

func FuzzReadReplay(f *testing.F) {
	f.Add("1735689600,a\n1735689601.5,b,2\n")
	f.Add("2025-01-01T00:00:00Z a 3\n")
	f.Fuzz(func(t *testing.T, in string) {
		p, err := ReadReplay(strings.NewReader(in), "fuzz")
		if err != nil {
			return
		}
		for i := 1; i < len(p.evs); i++ {
			if p.evs[i].At < p.evs[i-1].At || p.evs[i].Cost < 1 {
				t.Fatalf("event %d: %+v after %+v", i, p.evs[i], p.evs[i-1])
			}
		}
	})
}
