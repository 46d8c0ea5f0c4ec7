package gateway

import (
	"log/slog"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rlheader"
)

// TestEveryRouteGetsTheGatewaysSettings checks that the Middleware of a
// route is given every field of the gateway's httplimit.Settings as set,
// the queue's wait excepted (the gateway bounds it by MaxQueued): a field
// added to Settings reaches the routes with nothing to copy.
func TestEveryRouteGetsTheGatewaysSettings(t *testing.T) {
	store := memstore.New(memstore.Config{SweepInterval: -1})
	defer store.Close()
	var set httplimit.Settings
	v := reflect.ValueOf(&set).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int:
			f.SetInt(int64(418 + i))
		case reflect.Slice:
			f.SetBytes([]byte("secret"))
		}
	}
	set.Limiter = store
	set.Headers = rlheader.Legacy
	set.Logger = slog.New(slog.DiscardHandler)
	set.Observer = nopObserver{}
	set.Wait = httplimit.Sleep
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the test leaves Settings.%s zero: set it", v.Type().Field(i).Name)
		}
	}
	f, err := ParseFile("proxy.yaml", []byte("upstream: http://127.0.0.1:9\n"))
	if err != nil {
		t.Fatal(err)
	}
	f.Config.Settings = set
	g, err := New(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	got := g.limitsConfig(g.state.Load(), "r", nil, nil).Settings
	if got.Wait == nil {
		t.Error("the route's Middleware has no queue wait")
	}
	got.Wait, set.Wait = nil, nil
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(set)
	for i := range gv.NumField() {
		name := gv.Type().Field(i).Name
		if gf, wf := gv.Field(i), wv.Field(i); gf.Kind() == reflect.Func {
			if gf.Pointer() != wf.Pointer() {
				t.Errorf("Settings.%s is not the gateway's", name)
			}
		} else if !reflect.DeepEqual(gf.Interface(), wf.Interface()) {
			t.Errorf("Settings.%s is %v, want the gateway's %v", name, gf.Interface(), wf.Interface())
		}
	}
}

type nopObserver struct{}

func (nopObserver) Observe(httplimit.Decision) {}
