// Package daemon holds what the long-running commands, sluice serve and
// sluice proxy, share, so that each command is its flags and its wiring:
//
//   - the lifecycle (App): open the parts, serve, reload on SIGHUP and on
//     file change, drain within DrainGrace, close; the exit codes
//     (ExitCode, ExitWith, StoppedEarly);
//   - the config reloader (Reloader) and its file watcher, the fingerprint
//     of a config's files (CheckConfigFiles, FingerprintBeforeLoad);
//   - the listeners: their timeouts and connection caps (ListenerOptions,
//     CapConns), gRPC's call deadlines, TLS (GRPCTLS) and Unix socket
//     (ListenGRPC), the health Watch streams' drain (WatchDrain), the debug
//     listener (ListenDebug) and the admin listener's authentication
//     (AdminAuth);
//   - what the live page shows of the store's breaker (StoreState) and of
//     the running config (PageConfig), the log format and level
//     (NewLogger), the banner's addresses (LocalAddr) and the process's
//     metrics registry (NewMetricsRegistry);
//   - the access log: a stream or a file (OpenAccessLog, CheckAccessLog)
//     that a signal reopens for logrotate (ReopenAccessLogOn).
//
// It builds servers out of faces (gateway's HTTP server, the admin API and
// its page), so it is wiring in internal/archtest's layers: only cmd/sluice
// imports it, and it imports nothing from cmd.
//
// Shipped: built into the sluice binary through cmd/sluice; it imports no
// test-only package (internal/archtest holds that).
package daemon
