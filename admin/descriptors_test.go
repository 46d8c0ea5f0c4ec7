package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/admin"
	"github.com/sluicehq/sluice/memstore"
)

// webUsers is a KeyResolver of one rule: domain web, entry user=NAME,
// counted at web_user_NAME under 5 a minute, and for user=pro also at
// web_user_NAME#d under 100 a day.
type webUsers struct{}

var fiveAMinute = sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 5, Period: time.Minute, Burst: 5}
var hundredADay = sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100, Period: 24 * time.Hour, Burst: 100}

func (webUsers) CountedKeys(_ context.Context, domain string, es []admin.DescriptorEntry) ([]admin.CountedKey, error) {
	if domain != "web" || len(es) != 1 || es[0].Key != "user" {
		return nil, fmt.Errorf("%w: no rule of domain %q matches", admin.ErrNoRule, domain)
	}
	ks := []admin.CountedKey{{Rule: "web.user", Key: "web_user_" + es[0].Value, Limit: fiveAMinute}}
	if es[0].Value == "pro" {
		ks = append(ks, admin.CountedKey{Rule: "web.user#86400s", Key: "web_user_pro#d", Limit: hundredADay})
	}
	return ks, nil
}

type descState struct {
	Keys []struct {
		Rule, Key, Hash, Limit string
		Remaining, Capacity    int
		Refunded               int
	}
}

// The descriptor calls read and reset the keys the running config counts
// a descriptor under, in the operator's words (domain and entries): peek
// spends nothing and shows the key and its hash; reset gives back all
// that was spent, under the config's limit, for every limit of the
// descriptor; a descriptor no rule counts is 404, not a fresh key.
func TestDescriptorCallsReadAndResetTheConfigsKeys(t *testing.T) {
	clockless := memstore.New(memstore.Config{SweepInterval: -1})
	defer clockless.Close()
	f := newFixture(t, admin.Config{Limiter: clockless, KeyHash: func(k string) string { return "~h(" + k + ")" }})
	ctx := context.Background()
	for range 4 {
		clockless.AllowN(ctx, "web_user_pro", fiveAMinute, 1)
	}
	clockless.AllowN(ctx, "web_user_pro#d", hundredADay, 40)
	call := func(op, desc string) (int, descState, string) {
		t.Helper()
		code, body, _ := f.do(t, "POST", "/v1/descriptors/"+op, "Bearer "+token, desc)
		var st descState
		if code == 200 {
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				t.Fatalf("%s: %v in %s", op, err, body)
			}
		}
		return code, st, body
	}
	pro := `{"domain":"web","entries":[{"key":"user","value":"pro"}]}`
	for range 2 {
		code, st, body := call("peek", pro)
		if code != 200 || len(st.Keys) != 2 || st.Keys[0].Remaining != 1 || st.Keys[1].Remaining != 60 ||
			st.Keys[0].Key != "web_user_pro" || st.Keys[0].Hash != "~h(web_user_pro)" || st.Keys[0].Rule != "web.user" {
			t.Fatalf("peek pro: %d %s, want web_user_pro 1 of 5 left (hash shown), web_user_pro#d 60 of 100", code, body)
		}
	}
	code, st, body := call("reset", pro)
	if code != 200 || len(st.Keys) != 2 || st.Keys[0].Refunded != 4 || st.Keys[1].Refunded != 40 || st.Keys[1].Remaining != 100 {
		t.Fatalf("reset pro: %d %s, want 4 and 40 refunded (all that was spent), 100 left of the day's", code, body)
	}
	if res, _ := clockless.Peek(ctx, "web_user_pro#d", hundredADay); res.Remaining != 100 {
		t.Errorf("the store after reset: %d left of the day's 100", res.Remaining)
	}
	for _, bad := range []struct {
		desc string
		want int
	}{
		{`{"domain":"web","entries":[{"key":"nobody","value":"x"}]}`, http.StatusNotFound},
		{`{"domain":"other","entries":[{"key":"user","value":"pro"}]}`, http.StatusNotFound},
		{`{"domain":"web","entries":[]}`, http.StatusBadRequest},
		{`{"domain":"","entries":[{"key":"user","value":"x"}]}`, http.StatusBadRequest},
		{`{"domain":"web","entries":[{"key":"","value":"x"}]}`, http.StatusBadRequest},
		{`{"domain":"web","entries":[` + strings.Repeat(`{"key":"user","value":"x"},`, 64) + `{"key":"user","value":"x"}]}`, http.StatusBadRequest},
	} {
		for _, op := range []string{"peek", "reset"} {
			if code, _, body := call(op, bad.desc); code != bad.want {
				t.Errorf("%s %.80s: %d %s, want %d", op, bad.desc, code, body, bad.want)
			}
		}
	}
}
