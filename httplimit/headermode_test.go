package httplimit_test

import (
	"testing"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/rlheader"
)

// TestConfigHeaderModeFollowsItsFlags checks that a Config's header mode
// is the draft's headers unless NoDraftHeaders, with the legacy trio when
// LegacyHeaders: both, one or none.
func TestConfigHeaderModeFollowsItsFlags(t *testing.T) {
	for _, tt := range []struct {
		noDraft, legacy bool
		want            rlheader.Mode
	}{
		{false, false, rlheader.Draft11},
		{false, true, rlheader.Draft11 | rlheader.Legacy},
		{true, true, rlheader.Legacy},
		{true, false, rlheader.Off},
	} {
		c := httplimit.Config{Settings: httplimit.Settings{NoDraftHeaders: tt.noDraft, LegacyHeaders: tt.legacy}}
		if got := c.HeaderMode(); got != tt.want {
			t.Errorf("NoDraftHeaders %t, LegacyHeaders %t: header mode %v, want %v", tt.noDraft, tt.legacy, got, tt.want)
		}
	}
}
