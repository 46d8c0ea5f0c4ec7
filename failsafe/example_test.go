package failsafe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/memstore"
)

// down is a store that has gone away.
type down struct{}

func (down) AllowN(context.Context, string, sluice.Limit, int) (sluice.Result, error) {
	return sluice.Result{}, errors.New("dial tcp: connection refused")
}

func Example() {
	local := memstore.New(memstore.Config{})
	defer local.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	// Four servers share 100/min; while Redis is down each enforces a quarter.
	l, err := failsafe.New(failsafe.Config{Primary: down{}, Mode: failsafe.Local, Local: local, Nodes: 4, Logger: quiet})
	if err != nil {
		panic(err)
	}
	admitted := 0
	for range 100 {
		if r, err := l.Allow(context.Background(), "user:42", sluice.PerMinute(100)); err == nil && r.Allowed {
			admitted++
		}
	}
	fmt.Println("local fallback admitted", admitted)

	closed, err := failsafe.New(failsafe.Config{Primary: down{}, Mode: failsafe.Closed, Logger: quiet})
	if err != nil {
		panic(err)
	}
	_, err = closed.Allow(context.Background(), "user:42", sluice.PerMinute(100))
	fmt.Println(errors.Is(err, failsafe.ErrUnavailable))
	// Output:
	// local fallback admitted 25
	// true
}
