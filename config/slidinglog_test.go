package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
)

// logDoc is a domain with one sliding_log rule of rpu per hour, the rule's
// extra keys and the file's extra root keys.
func logDoc(root string, rpu int, extra string) string {
	return root + "domain: api\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: hour\n      requests_per_unit: " +
		itoa(rpu) + "\n      algorithm: sliding_log\n" + extra
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// An exact sliding_log keeps up to its rate in entries per key: one within
// max_log_entries loads exact, one above is refused at its rate_limit's
// line, naming the precision that would fit, and loads with it.
func TestSlidingLogAboveMaxLogEntriesIsRefusedAtItsLine(t *testing.T) {
	d, err := config.Parse("rules.yaml", []byte(logDoc("", config.DefaultMaxLogEntries, "")))
	if err != nil {
		t.Fatalf("a log of %d per hour: %v", config.DefaultMaxLogEntries, err)
	}
	if got := d.Lookup([]config.Entry{{Key: "user"}}).Limit; got.Precision != 0 || got.LogEntries() != config.DefaultMaxLogEntries {
		t.Errorf("limit %+v: want exact (no precision), %d entries at worst", got, config.DefaultMaxLogEntries)
	}
	_, err = config.Parse("rules.yaml", []byte(logDoc("", config.DefaultMaxLogEntries+1, "")))
	want := "rules.yaml:5:7: config: sliding_log of 131073 per 1h0m0s keeps up to 131073 entries (2097168 bytes) per key, more than max_log_entries 131072: set precision: 27.46603ms or coarser"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("a log of %d per hour: error %v, want it to start %q", config.DefaultMaxLogEntries+1, err, want)
	}
	d, err = config.Parse("rules.yaml", []byte(logDoc("", config.DefaultMaxLogEntries+1, "      precision: 27.46603ms\n")))
	if err != nil {
		t.Fatalf("with the precision the error names: %v", err)
	}
	if got := d.Lookup([]config.Entry{{Key: "user"}}).Limit; got.Precision != 27466030*time.Nanosecond || got.LogEntries() > config.DefaultMaxLogEntries {
		t.Errorf("limit %+v (%d entries): want precision 27.46603ms, at most %d entries", got, got.LogEntries(), config.DefaultMaxLogEntries)
	}
	// A file may lower the cap; the error then names the line that set it.
	_, err = config.Parse("rules.yaml", []byte(logDoc("max_log_entries: 1000\n", 1001, "")))
	if err == nil || !strings.HasPrefix(err.Error(), "rules.yaml:6:7: ") || !strings.Contains(err.Error(), "(max_log_entries is set at line 1)") {
		t.Fatalf("1001 per hour under max_log_entries 1000: error %v, want it at 6:7 naming line 1", err)
	}
}

// precision is refused where it means nothing: on another algorithm, as
// other than a positive duration, longer than the period, and on an
// unlimited rule.
func TestPrecisionRefusedWhereItMeansNothing(t *testing.T) {
	for name, doc := range map[string]string{
		"fixed window": "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 10, precision: 1s}\n",
		"not duration": logDoc("", 10, "      precision: often\n"),
		"negative":     logDoc("", 10, "      precision: -1s\n"),
		"over period":  logDoc("", 10, "      precision: 2h\n"),
		"unlimited":    "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unlimited: true, precision: 1s}\n",
		"max zero":     logDoc("max_log_entries: 0\n", 10, ""),
	} {
		if _, err := config.Parse("rules.yaml", []byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.HasPrefix(err.Error(), "rules.yaml:") {
			t.Errorf("%s: error %q has no file:line", name, err)
		}
	}
}
