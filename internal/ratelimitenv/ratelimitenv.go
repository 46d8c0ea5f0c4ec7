// Package ratelimitenv is the one table of the environment variables that
// the sluice commands read or name, serve's above all: envoyproxy/ratelimit's,
// and Sluice's own (SLUICE_HEADERS, MAX_COST, ...). For each, the flag whose
// default it feeds, whether Sluice acts on it (always, never, with one value
// only, or as the store and the other settings decide), whether its
// presence says that serve was started as envoyproxy/ratelimit is (its
// image swapped, its Deployment kept), and the command that reads it when
// it is not serve. Its tests fail when the code reads a variable by a name
// the table does not hold, and when docs/serve.md documents another set. The
// start-up line of variables accepted and not acted on and the tests'
// lists of variables are read from it. It also reads the settings serve
// takes from envoyproxy/ratelimit's variables beyond flag defaults: the
// -headers default (HeadersDefault), the legacy headers' names
// (LegacyHeaderNames), and RUNTIME_ROOT's config directory and the root
// watched for its swap (RuntimeConfigDir, RuntimeWatchRoots). It is
// shipped code, not a test helper.
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package (internal/archtest holds that).
package ratelimitenv

import (
	"os"
	"strings"

	"github.com/sluicehq/sluice/internal/envflag"
)

// Acted says whether Sluice acts on a variable.
type Acted uint8

const (
	// Always: the variable is acted on whenever it is set (most feed a
	// flag's default).
	Always Acted = iota
	// Never: the variable is accepted and not acted on; a set one is
	// named in the start-up line.
	Never
	// OnlyValue: the variable is acted on with one value only (Var.Value,
	// compared as envflag.SameValue does); with another it is named, with its
	// value, in the start-up line.
	OnlyValue
	// Decided: whether the variable is acted on depends on the store and
	// the other settings; Var.DecidedBy names the code that says so, and
	// names it, with why, in the start-up line.
	Decided
)

// A Var is one environment variable: envoyproxy/ratelimit's, or Sluice's
// own (Own). The zero Var is no variable.
type Var struct {
	Name string
	// Flag is the flag whose default the variable feeds ("-store"), or ""
	// for none.
	Flag  string
	Acted Acted
	// Value is the one value acted on, for OnlyValue.
	Value string
	// DecidedBy names the code that decides a Decided variable.
	DecidedBy string
	// Group gathers the variables one setting turns on together:
	// "tracing" (TRACING_ENABLED), "statsd" (USE_STATSD), "dogstatsd"
	// (USE_DOG_STATSD), "xds" (CONFIG_TYPE=GRPC_XDS_SOTW); "" for none.
	Group string
	// Deployment says that the variable being set (even empty) means serve
	// runs as envoyproxy/ratelimit does; see Deployment.
	Deployment bool
	// Own says that the name is Sluice's, not envoyproxy/ratelimit's (nor
	// the Go runtime's, GOGC): docs/serve.md documents it with its flag,
	// not among envoyproxy/ratelimit's variables.
	Own bool
	// Command is the one command that reads the variable when it is not
	// serve ("proxy", "admin"); "" for serve's (which other commands may
	// read too).
	Command string
}

// The deciders of Decided variables.
const (
	byRedis     = "stores.RedisOptions.NotActedOn"
	byTelemetry = "telemetrySettings.notActedOn"
	byXDS       = "xdsNotActedOn"
)

// Vars is the table, in the order the start-up line names variables of
// one kind (Never, then OnlyValue).
var Vars = []Var{
	// Never acted on: Prometheus is always served at GET /metrics, and
	// Sluice has no memcache backend.
	{Name: "PROMETHEUS_ADDR", Acted: Never},
	{Name: "PROMETHEUS_PATH", Acted: Never},
	{Name: "PROMETHEUS_MAPPER_YAML", Acted: Never},
	{Name: "MEMCACHE_HOST_PORT", Acted: Never},
	{Name: "MEMCACHE_MAX_IDLE_CONNS", Acted: Never},
	{Name: "MEMCACHE_SRV", Acted: Never},
	{Name: "MEMCACHE_SRV_REFRESH", Acted: Never},
	{Name: "MEMCACHE_TLS_CLIENT_CERT", Acted: Never},
	{Name: "MEMCACHE_TLS_CLIENT_KEY", Acted: Never},
	{Name: "MEMCACHE_TLS_CACERT", Acted: Never},

	// Acted on with one value only: Sluice always ignores dot files, only
	// speaks TCP to Redis, has no memcache backend, and always serves
	// Prometheus's metrics at GET /metrics (DISABLE_STATS=true stops only
	// statsd).
	{Name: "RUNTIME_IGNOREDOTFILES", Acted: OnlyValue, Value: "true"},
	{Name: "REDIS_SOCKET_TYPE", Acted: OnlyValue, Value: "tcp", Deployment: true},
	{Name: "BACKEND_TYPE", Acted: OnlyValue, Value: "redis", Deployment: true},
	{Name: "DISABLE_STATS", Acted: OnlyValue, Value: "false"},
	{Name: "USE_PROMETHEUS", Acted: OnlyValue, Value: "false"},
	{Name: "MEMCACHE_TLS", Acted: OnlyValue, Value: "false"},
	{Name: "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", Acted: OnlyValue, Value: "false"},

	// Acted on, and saying where serve was started.
	{Name: "RUNTIME_ROOT", Flag: "-config", Deployment: true},
	{Name: "RUNTIME_SUBDIRECTORY", Flag: "-config", Deployment: true},
	{Name: "CONFIG_TYPE", Deployment: true},
	{Name: "REDIS_URL", Flag: "-store", Deployment: true},
	{Name: "USE_STATSD", Acted: Decided, DecidedBy: byTelemetry, Deployment: true},

	// Tracing's, statsd's and DogStatsD's: acted on when their setting
	// is on.
	{Name: "TRACING_SERVICE_NAME", Acted: Decided, DecidedBy: byTelemetry, Group: "tracing"},
	{Name: "TRACING_SERVICE_NAMESPACE", Acted: Decided, DecidedBy: byTelemetry, Group: "tracing"},
	{Name: "TRACING_SERVICE_INSTANCE_ID", Acted: Decided, DecidedBy: byTelemetry, Group: "tracing"},
	{Name: "TRACING_EXPORTER_PROTOCOL", Acted: Decided, DecidedBy: byTelemetry, Group: "tracing"},
	{Name: "TRACING_SAMPLING_RATE", Acted: Decided, DecidedBy: byTelemetry, Group: "tracing"},
	{Name: "STATSD_HOST", Acted: Decided, DecidedBy: byTelemetry, Group: "statsd"},
	{Name: "STATSD_PORT", Acted: Decided, DecidedBy: byTelemetry, Group: "statsd"},
	{Name: "EXTRA_TAGS", Acted: Decided, DecidedBy: byTelemetry, Group: "statsd"},
	{Name: "STATS_FLUSH_INTERVAL", Acted: Decided, DecidedBy: byTelemetry, Group: "statsd"},
	{Name: "USE_DOG_STATSD_MOGRIFIERS", Acted: Decided, DecidedBy: byTelemetry, Group: "dogstatsd"},
	{Name: "STATSD_PROTOCOL", Acted: Decided, DecidedBy: byTelemetry},

	// The xDS config provider's: acted on under CONFIG_TYPE=GRPC_XDS_SOTW,
	// the TLS ones with CONFIG_GRPC_XDS_SERVER_USE_TLS.
	{Name: "CONFIG_GRPC_XDS_NODE_ID", Acted: Decided, DecidedBy: byXDS, Group: "xds"},
	{Name: "CONFIG_GRPC_XDS_NODE_METADATA", Acted: Decided, DecidedBy: byXDS, Group: "xds"},
	{Name: "CONFIG_GRPC_XDS_SERVER_URL", Acted: Decided, DecidedBy: byXDS, Group: "xds"},
	{Name: "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", Acted: Decided, DecidedBy: byXDS, Group: "xds"},
	{Name: "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", Acted: Decided, DecidedBy: byXDS, Group: "xds"},
	{Name: "CONFIG_GRPC_XDS_SERVER_USE_TLS", Acted: Decided, DecidedBy: byXDS, Group: "xds"},
	{Name: "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", Acted: Decided, DecidedBy: byXDS, Group: "xds"},
	{Name: "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", Acted: Decided, DecidedBy: byXDS, Group: "xds"},
	{Name: "CONFIG_GRPC_XDS_SERVER_TLS_CACERT", Acted: Decided, DecidedBy: byXDS, Group: "xds"},
	{Name: "CONFIG_GRPC_XDS_SERVER_TLS_SAN", Acted: Decided, DecidedBy: byXDS, Group: "xds"},
	{Name: "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", Acted: Decided, DecidedBy: byXDS, Group: "xds"},
	{Name: "XDS_CLIENT_BACKOFF_MAX_INTERVAL", Acted: Decided, DecidedBy: byXDS, Group: "xds"},
	{Name: "XDS_CLIENT_BACKOFF_RANDOM_FACTOR", Acted: Decided, DecidedBy: byXDS, Group: "xds"},
	{Name: "XDS_CLIENT_BACKOFF_JITTER", Acted: Decided, DecidedBy: byXDS, Group: "xds"},
	{Name: "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", Acted: Decided, DecidedBy: byXDS, Group: "xds"},

	// The listeners, the config and the answers: acted on, as
	// envoyproxy/ratelimit does (docs/serve.md says where not quite).
	{Name: "HOST", Flag: "-http-addr"},
	{Name: "PORT", Flag: "-http-addr"},
	{Name: "GRPC_HOST", Flag: "-grpc-addr"},
	{Name: "GRPC_PORT", Flag: "-grpc-addr"},
	{Name: "DEBUG_HOST", Flag: "-debug-addr"},
	{Name: "DEBUG_PORT", Flag: "-debug-addr"},
	{Name: "GRPC_UDS", Flag: "-grpc-uds"},
	{Name: "GRPC_SERVER_USE_TLS", Flag: "-grpc-tls"},
	{Name: "GRPC_SERVER_TLS_CERT", Flag: "-grpc-tls-cert"},
	{Name: "GRPC_SERVER_TLS_KEY", Flag: "-grpc-tls-key"},
	{Name: "GRPC_CLIENT_TLS_CACERT", Flag: "-grpc-tls-client-ca"},
	{Name: "GRPC_CLIENT_TLS_SAN", Flag: "-grpc-tls-client-san"},
	{Name: "GRPC_MAX_CONNECTION_AGE", Flag: "-grpc-max-connection-age"},
	{Name: "GRPC_MAX_CONNECTION_AGE_GRACE", Flag: "-grpc-max-connection-age-grace"},
	{Name: "GRPC_MAX_CONNECTION_IDLE", Flag: "-grpc-idle-timeout"},
	{Name: "RUNTIME_APPDIRECTORY", Flag: "-config"},
	{Name: "RUNTIME_WATCH_ROOT"},
	{Name: "FORCE_START_WITHOUT_INITIAL_CONFIG", Flag: "-start-without-config"},
	{Name: "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", Flag: "-health-needs-config"},
	{Name: "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", Flag: "-health-needs-store"},
	{Name: "MERGE_DOMAIN_CONFIG"},
	{Name: "LOG_LEVEL", Flag: "-log-level"},
	{Name: "LOG_FORMAT", Flag: "-log-format"},
	{Name: "SHADOW_MODE", Flag: "-shadow"},
	{Name: "QUOTA_MODE"},
	{Name: "RESPONSE_DYNAMIC_METADATA"},
	{Name: "NEAR_LIMIT_RATIO"},
	{Name: "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT"},
	{Name: "LOCAL_CACHE_SIZE_IN_BYTES", Flag: "-local-cache"},
	{Name: "LIMIT_RESPONSE_HEADERS_ENABLED", Flag: "-headers"},
	{Name: "LIMIT_LIMIT_HEADER"},
	{Name: "LIMIT_REMAINING_HEADER"},
	{Name: "LIMIT_RESET_HEADER"},
	{Name: "TRACING_ENABLED"},
	{Name: "USE_DOG_STATSD"},

	// The Redis store's: acted on as the store decides.
	{Name: "REDIS_TYPE", Flag: "-store"},
	{Name: "REDIS_AUTH", Flag: "-store"},
	{Name: "REDIS_TLS", Flag: "-store"},
	{Name: "CACHE_KEY_PREFIX", Flag: "-prefix"},
	{Name: "REDIS_KEY_FORMAT", Flag: "-redis-key-format", Own: true},
	{Name: "REDIS_POOL_SIZE", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_PIPELINE_WINDOW", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_PIPELINE_LIMIT", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_TIMEOUT", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_SENTINEL_AUTH", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_TLS_CLIENT_CERT", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_TLS_CLIENT_KEY", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_TLS_CACERT", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_CLUSTER_PIPELINE_PARALLELISM", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_POOL_ON_EMPTY_BEHAVIOR", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_STARTUP_INITIAL_INTERVAL", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_STARTUP_MAX_INTERVAL", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_STARTUP_MAX_ELAPSED_TIME", Acted: Decided, DecidedBy: byRedis},
	{Name: "EXPIRATION_JITTER_MAX_SECONDS", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_PERSECOND", Flag: "-store-per-second", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_PERSECOND_URL", Flag: "-store-per-second", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_PERSECOND_TYPE", Flag: "-store-per-second", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_PERSECOND_AUTH", Flag: "-store-per-second", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_PERSECOND_TLS", Flag: "-store-per-second", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_PERSECOND_SOCKET_TYPE", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_PERSECOND_POOL_SIZE", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_PERSECOND_PIPELINE_WINDOW", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_PERSECOND_PIPELINE_LIMIT", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_PERSECOND_TIMEOUT", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_PERSECOND_SENTINEL_AUTH", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", Acted: Decided, DecidedBy: byRedis},
	{Name: "REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", Acted: Decided, DecidedBy: byRedis},

	// Sluice's own: acted on, each the default of its flag.
	{Name: "SLUICE_HEADERS", Flag: "-headers", Own: true},
	{Name: "SLUICE_HEADER_POLICY_NAMES", Flag: "-header-policy-names", Own: true},
	{Name: "SLUICE_FLEET", Flag: "-fleet", Own: true},
	{Name: "SLUICE_ADMIN_TOKEN", Own: true},
	{Name: "ALLOW_REFUNDS", Flag: "-allow-refunds", Own: true},
	{Name: "MEMSTORE_MAX_BYTES", Flag: "-memory-max-bytes", Own: true},
	{Name: "MAX_OVERRIDE", Flag: "-max-override", Own: true},
	{Name: "MAX_COST", Flag: "-max-cost", Own: true},
	{Name: "MAX_DESCRIPTORS", Flag: "-max-descriptors", Own: true},
	{Name: "MAX_ENTRIES", Flag: "-max-entries", Own: true},
	{Name: "DETAILED_METRIC_MAX_SERIES", Flag: "-detailed-metric-max-series", Own: true},
	{Name: "JSON_MAX_BYTES_IN_FLIGHT", Flag: "-json-max-bytes-in-flight", Own: true},
	{Name: "JSON_MAX_BYTES_PER_PEER", Flag: "-json-max-bytes-per-peer", Own: true},
	{Name: "JSON_BODY_MIN_RATE", Flag: "-json-body-min-rate", Own: true},
	{Name: "HTTP_READ_HEADER_TIMEOUT", Flag: "-http-read-header-timeout", Own: true},
	{Name: "HTTP_READ_TIMEOUT", Flag: "-http-read-timeout", Own: true},
	{Name: "HTTP_WRITE_TIMEOUT", Flag: "-http-write-timeout", Own: true},
	{Name: "HTTP_IDLE_TIMEOUT", Flag: "-http-idle-timeout", Own: true},
	{Name: "HTTP_MAX_CONNECTIONS", Flag: "-http-max-conns", Own: true},
	{Name: "GRPC_CONNECTION_TIMEOUT", Flag: "-grpc-handshake-timeout", Own: true},
	{Name: "GRPC_MIN_PING_INTERVAL", Flag: "-grpc-min-ping-interval", Own: true},
	{Name: "GRPC_REQUEST_TIMEOUT", Flag: "-grpc-request-timeout", Own: true},
	{Name: "GRPC_MAX_CONNECTIONS", Flag: "-grpc-max-conns", Own: true},
	{Name: "RLQS_IDLE_TIMEOUT", Flag: "-rlqs-idle-timeout", Own: true},
	{Name: "RLQS_MAX_BYTES", Flag: "-rlqs-max-bytes", Own: true},
	{Name: "RLQS_MAX_STREAMS", Flag: "-rlqs-max-streams", Own: true},
	{Name: "RLQS_MAX_STREAMS_PER_CONNECTION", Flag: "-rlqs-max-streams-per-conn", Own: true},
	{Name: "RLQS_CLIENT_NAMES", Flag: "-rlqs-client-names", Own: true},
	{Name: "RLQS_DIVIDE_BY_PEER", Flag: "-rlqs-divide-by-peer", Own: true},

	// Read by another command only.
	{Name: "SLUICE_ADMIN_URL", Flag: "-url", Own: true, Command: "admin"},
	{Name: "GOGC", Command: "proxy"},
}

// NotActedOn returns the variables of the table that are set and that
// Sluice never acts on (their names), then those acted on with one value
// only that are set to another ("NAME=value"), each kind in table order.
// The Decided variables are their deciders' to name.
func NotActedOn() []string {
	var out []string
	for _, v := range Vars {
		if _, ok := os.LookupEnv(v.Name); ok && v.Acted == Never {
			out = append(out, v.Name)
		}
	}
	for _, v := range Vars {
		if val, ok := os.LookupEnv(v.Name); ok && v.Acted == OnlyValue && !envflag.SameValue(val, v.Value) {
			out = append(out, v.Name+"="+val)
		}
	}
	return out
}

// Deployment reports whether one of the Deployment variables is set (even
// empty): serve then runs as envoyproxy/ratelimit does, and keeps its
// defaults where they change what clients see.
func Deployment() bool {
	for _, v := range Vars {
		if _, ok := os.LookupEnv(v.Name); ok && v.Deployment {
			return true
		}
	}
	return false
}

// Names returns the names of the variables that match: a nil match is
// every variable.
func Names(match func(Var) bool) []string {
	var out []string
	for _, v := range Vars {
		if match == nil || match(v) {
			out = append(out, v.Name)
		}
	}
	return out
}

// Redis reports whether v is one of the Redis store's variables that
// stores.RedisOptions reads and names.
func Redis(v Var) bool { return v.DecidedBy == byRedis || v.Name == "REDIS_KEY_FORMAT" }

// MainRedis reports whether v is one of the main Redis store's variables
// that stores.RedisOptions names, in the order it names them with the
// memory store.
func MainRedis(v Var) bool {
	return v.DecidedBy == byRedis && !strings.HasPrefix(v.Name, "REDIS_PERSECOND")
}

// PerSecondURL reports whether v is one of the variables that build the
// per-second store's URL (REDIS_PERSECOND_URL, _TYPE, _AUTH, _TLS).
func PerSecondURL(v Var) bool {
	return strings.HasPrefix(v.Name, "REDIS_PERSECOND_") && v.Flag == "-store-per-second"
}

// PerSecondTuning reports whether v is one of the per-second store's
// tuning variables (REDIS_PERSECOND_POOL_SIZE and the others).
func PerSecondTuning(v Var) bool {
	return strings.HasPrefix(v.Name, "REDIS_PERSECOND_") && v.Flag == ""
}

// InGroup returns the match of the variables of group g (see Var.Group).
func InGroup(g string) func(Var) bool { return func(v Var) bool { return v.Group == g } }

// XDSTLS reports whether v is one of the xDS provider's TLS variables,
// which CONFIG_GRPC_XDS_SERVER_USE_TLS turns on.
func XDSTLS(v Var) bool { return v.Group == "xds" && strings.Contains(v.Name, "_TLS_") }
