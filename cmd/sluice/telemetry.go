package main

import (
	"context"

	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/telemetry"
)

// startTelemetry starts serve's tracing and statsd (before the service,
// which counts into the statsd store) and registers their flush to run
// after the drain, within the app's CloseContext: the spans and counts of
// the requests the drain let finish are sent too, if time is left.
func (s *serveApp) startTelemetry(ctx context.Context, a *daemon.App) error {
	t, err := telemetry.Start(ctx, s.telSet, s.log)
	if err != nil {
		return daemon.ExitCode(1, err)
	}
	s.tel = t
	a.OnClose(func() {
		flush, cancel := a.CloseContext()
		defer cancel()
		t.Shutdown(flush, s.log)
	})
	return nil
}
