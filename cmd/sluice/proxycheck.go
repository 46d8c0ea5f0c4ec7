package main

import (
	"cmp"
	"context"
	"fmt"

	"github.com/sluicehq/sluice/internal/daemon"
)

// preflight runs, for sluice proxy -check, the checks of start-up that
// need no connection: the log key secret's file (readSecret), the plans
// block and -plans (checkPlans), the access log's file (checkAccessLog)
// and the admin listener's token, TLS certificate, key and client CA files
// (checkAdmin), so that a config -check passes does not then fail to start for a file
// or a flag. Each error names the file and line of the setting, or the flag.
func (p *proxyApp) preflight(ctx context.Context) error {
	if _, err := p.readSecret(ctx); err != nil {
		return err
	}
	if err := p.checkPlans(); err != nil {
		return err
	}
	if err := p.checkAccessLog(); err != nil {
		return err
	}
	return p.checkAdmin(ctx)
}

// checkAdmin refuses what the admin listener's start-up refuses: its
// flags without -admin-addr, a token file or TLS file that cannot be read
// (daemon.AdminAuth.Preflight).
func (p *proxyApp) checkAdmin(ctx context.Context) error {
	if p.o.adminAddr == "" {
		return p.o.admin.CheckOff(p.o.fs)
	}
	return p.o.admin.Preflight(ctx)
}

// at is where the file sets key ("proxy.yaml:12"), or its name alone.
func (p *proxyApp) at(key string) string {
	if l := p.file.Lines[key]; l > 0 {
		return fmt.Sprintf("%s:%d", p.file.Name, l)
	}
	return p.file.Name
}

// readSecret reads the log key secret, -log-key-secret-file's before the
// file's log_key_secret_file (exit status 2 when it cannot).
func (p *proxyApp) readSecret(ctx context.Context) ([]byte, error) {
	if p.o.logKeySecretFile != "" || p.file.LogKeySecretFile == "" {
		b, err := readLogKeySecret(ctx, p.o.logKeySecretFile)
		if err != nil {
			return nil, daemon.ExitCode(2, err)
		}
		return b, nil
	}
	b, err := readKeySecret(ctx, p.file.LogKeySecretFile)
	if err != nil {
		return nil, daemon.ExitCode(2, fmt.Sprintf("%s: log_key_secret_file: %v (write one with: openssl rand -hex 32 > FILE; or remove the line for a random secret per process)", p.at("log_key_secret_file"), err))
	}
	return b, nil
}

// checkPlans refuses a plans block without -plans (no limit could look a
// tenant up) and -plans without a plans block, with exit status 2.
func (p *proxyApp) checkPlans() error {
	if p.file.Config.Plans != nil && p.o.plans.url == "" {
		return daemon.ExitCode(2, fmt.Sprintf("%s: plans: needs -plans postgres://… (the database of tenants' plans and overrides that sluice serve or sluice migrate made); without one, remove the plans block", p.at("plans")))
	}
	return p.o.plans.check(p.file)
}

// checkAccessLog refuses an access log file that start-up could not open
// (daemon.CheckAccessLog), naming the flag or the file's line.
func (p *proxyApp) checkAccessLog() error {
	v := cmp.Or(p.o.accessLog, p.file.AccessLog)
	err := daemon.CheckAccessLog(v)
	switch {
	case err == nil:
		return nil
	case p.o.accessLog == "":
		return fmt.Errorf("%s: access_log %s: %w", p.at("access_log"), v, err)
	}
	return fmt.Errorf("-access-log %s: %w", v, err)
}
