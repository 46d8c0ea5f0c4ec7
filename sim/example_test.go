package sim_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// The boundary attack: 100 requests just before a minute boundary and 100
// just after. The fixed window admits all 200 within one rolling minute; the
// sliding log, exact, admits 100.
func ExampleRun() {
	rep, err := sim.Run(sim.Config{Rate: 100, Period: time.Minute, Burst: 20, Duration: 2 * time.Minute}, sim.Boundary{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range rep.Algorithms {
		fmt.Printf("%-14s admitted %3d, at most %3d in a minute\n", a.Algorithm, a.Admitted, a.MaxInPeriod)
	}
	// Output:
	// token_bucket   admitted  39, at most  39 in a minute
	// fixed_window   admitted 200, at most 200 in a minute
	// sliding_window admitted 110, at most 110 in a minute
	// sliding_log    admitted 100, at most 100 in a minute
	// leaky_bucket   admitted  39, at most  39 in a minute
}
