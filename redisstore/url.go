package redisstore

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/redact"
)

// ParseURL turns a Redis URL into client options. Errors never show the
// URL's password. The forms:
//
//	redis://[user[:password]@]host[:port][/db][?option=value…]
//	rediss://…                      the same over TLS
//	redis+cluster://[user[:password]@]host:port,host:port,…[?…]
//	rediss+cluster://…              a Cluster over TLS
//	redis+sentinel://[user[:password]@]host:port,host:port,…/master-name[?…]
//	rediss+sentinel://…             Sentinel-managed Redis over TLS
//
// The port defaults to 6379. A Cluster is given by any of its nodes (the rest
// are discovered); a Sentinel URL lists sentinels and names the master set.
// The options are rueidis's: db, dial_timeout, write_timeout,
// skip_verify (TLS), protocol and the others it documents.
func ParseURL(s string) (rueidis.ClientOption, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: URL %q: want redis://host:port, rediss://…, redis+cluster://host:port,host:port or redis+sentinel://host:port,…/master", redact.URL(s))
	}
	base, kind, _ := strings.Cut(scheme, "+")
	if base != "redis" && base != "rediss" {
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: URL %q: scheme %q is not redis, rediss, redis+cluster or redis+sentinel", redact.URL(s), scheme)
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	userinfo, hostlist := "", authority
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		userinfo, hostlist = authority[:i+1], authority[i+1:]
	}
	hosts := strings.Split(hostlist, ",")
	for _, h := range hosts {
		if h == "" {
			return rueidis.ClientOption{}, fmt.Errorf("redisstore: URL %q: empty host in %q", redact.URL(s), hostlist)
		}
	}
	path, query, _ := strings.Cut(tail, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: URL %q: %w", redact.URL(s), err)
	}
	switch kind {
	case "":
		if len(hosts) > 1 {
			return rueidis.ClientOption{}, fmt.Errorf("redisstore: URL %q lists %d hosts: use redis+cluster:// or redis+sentinel://", redact.URL(s), len(hosts))
		}
	case "cluster":
		if strings.Trim(path, "/") != "" {
			return rueidis.ClientOption{}, fmt.Errorf("redisstore: URL %q: a Cluster has no database path", redact.URL(s))
		}
		path = ""
	case "sentinel":
		master := strings.Trim(path, "/")
		if master == "" || strings.Contains(master, "/") {
			return rueidis.ClientOption{}, fmt.Errorf("redisstore: URL %q: want redis+sentinel://host:port,…/master-name", redact.URL(s))
		}
		q.Set("master_set", master)
		path = ""
	default:
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: URL %q: scheme %q is not redis, rediss, redis+cluster or redis+sentinel", redact.URL(s), scheme)
	}
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	u := base + "://" + userinfo + hosts[0] + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	opt, err := rueidis.ParseURL(u)
	if err != nil {
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: URL %q: %w", redact.URL(s), err)
	}
	opt.DisableCache = true // the store never reads through the client-side cache
	if kind == "" {
		opt.ForceSingleClient = true
	}
	return opt, nil
}
