// Package config holds rowq's server configuration: defaults, the ROWQ_*
// environment, Fireworq's FIREWORQ_* names (so a Fireworq deployment can
// switch binaries) and command-line flags. Precedence: flag > ROWQ_* >
// FIREWORQ_* > default.
package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/egress"
	"github.com/rowq/rowq/internal/signing"
	"github.com/rowq/rowq/internal/store/dburl"
	"github.com/rowq/rowq/internal/tracing"
)

// Config is the server's configuration.
type Config struct {
	Bind        string // address the HTTP API listens on
	DatabaseURL string // mysql://, postgres:// or sqlite:// URL

	QueueDefault                string // queue for unrouted categories; "" for none
	QueueDefaultMaxWorkers      int
	QueueDefaultPollingInterval int // milliseconds

	ShutdownTimeout       time.Duration
	ConfigRefreshInterval time.Duration
	NodeTTL               time.Duration
	GrabLease             time.Duration
	RescueInterval        time.Duration
	// OutboxIdlePoll is the wait between two probes of the outbox on
	// MySQL/MariaDB and SQLite once it has stayed empty for a minute.
	OutboxIdlePoll time.Duration
	// BreakerOpen is how long a worker host's circuit breaker first stays
	// open (doubled on each failed probe, at most 20 times as long).
	BreakerOpen  time.Duration
	MaxBodyBytes int64
	// MaxResultBytes caps a worker's result (docs/lifecycle.md): a push
	// success over it stands with its result dropped, a completion over
	// it answers 413.
	MaxResultBytes int
	// ScheduleMisfireGrace is how late a schedule's tick may fire and still
	// be on time; older ticks are handled by the misfire policy.
	ScheduleMisfireGrace time.Duration

	DispatchUserAgent       string
	DispatchKeepAlive       bool
	DispatchMaxConnsPerHost int
	DispatchIdleConnTimeout time.Duration
	DispatchHandoff         bool

	// TLS: with TLSCert and TLSKey (PEM files, both or neither) the API
	// serves HTTPS, and SIGHUP reads them again. CAFile (PEM) holds the
	// certificate authorities trusted when nudging other nodes over HTTPS;
	// "" trusts the system's.
	TLSCert string
	TLSKey  string
	CAFile  string

	// Worker URLs and signed deliveries (docs/security.md#worker-urls): the allow
	// list, the refusal of private addresses, and the Standard Webhooks
	// signing secrets, comma-separated, "" for none.
	WorkerURLAllow    string
	WorkerDenyPrivate bool
	SigningSecret     string
	// Auth is auto, on or off (see internal/auth).
	Auth string
	// AdminToken is a token with every scope and no row: ROWQ_ADMIN_TOKEN,
	// or the content of AdminTokenFile. It is no option, so that it
	// appears in no flag list, process list or /settings.
	AdminToken     string
	AdminTokenFile string

	// MetricsQueueLimit is the most queues /metrics gives series of their
	// own; with more, it gives only the totals (internal/metrics).
	MetricsQueueLimit int
	// OTelEndpoint is the OTLP/HTTP receiver rowq's spans are exported to
	// (internal/tracing); "" exports none.
	OTelEndpoint string

	NodeID        string // default: host-pid-random
	AdvertiseHost string // address peers and operators reach this node at; default: Bind
	LogLevel      string // debug, info, warn, error
	LogFormat     string // text or json
}

// Default returns the configuration used when nothing is set: embedded
// SQLite in ./rowq.db, listening on 127.0.0.1:8080.
func Default() Config {
	return Config{
		Bind:                        "127.0.0.1:8080",
		DatabaseURL:                 "sqlite://rowq.db",
		QueueDefault:                "default",
		QueueDefaultMaxWorkers:      20,
		QueueDefaultPollingInterval: 200,
		ShutdownTimeout:             30 * time.Second,
		ConfigRefreshInterval:       time.Second,
		GrabLease:                   30 * time.Second,
		RescueInterval:              5 * time.Second,
		BreakerOpen:                 30 * time.Second,
		OutboxIdlePoll:              500 * time.Millisecond,
		ScheduleMisfireGrace:        5 * time.Second,
		MaxBodyBytes:                1 << 20,
		MaxResultBytes:              64 << 10,
		DispatchUserAgent:           "rowq",
		DispatchKeepAlive:           true,
		DispatchMaxConnsPerHost:     0,
		DispatchIdleConnTimeout:     90 * time.Second,
		DispatchHandoff:             true,
		MetricsQueueLimit:           1000,
		Auth:                        "auto",
		LogLevel:                    "info",
		LogFormat:                   "text",
	}
}

// option is one setting: its flag, its ROWQ_ name, its Fireworq name if it
// has one, and how to parse each.
type option struct {
	flag, usage string
	env         string // ROWQ_…
	fireworq    string // FIREWORQ_…, "" if none
	value       flag.Value
	// fromFireworq parses the Fireworq form, whose units differ (seconds,
	// milliseconds as bare integers); nil means the same as value.Set.
	fromFireworq func(string) error
}

func (c *Config) options() []option {
	return []option{
		{flag: "bind", env: "ROWQ_BIND", fireworq: "FIREWORQ_BIND", value: (*strValue)(&c.Bind), usage: "address the HTTP API listens on"},
		{flag: "database-url", env: "ROWQ_DATABASE_URL", fireworq: "FIREWORQ_MYSQL_DSN", value: (*strValue)(&c.DatabaseURL),
			usage:        "database: mysql://user:pass@host:3306/db, postgres://user:pass@host:5432/db or sqlite://path",
			fromFireworq: func(s string) (err error) { c.DatabaseURL, err = MySQLURLFromDSN(s); return err }},
		{flag: "queue-default", env: "ROWQ_QUEUE_DEFAULT", fireworq: "FIREWORQ_QUEUE_DEFAULT", value: (*strValue)(&c.QueueDefault),
			usage: `queue for jobs whose category has no routing, created if missing; "" refuses such jobs`},
		{flag: "queue-default-max-workers", env: "ROWQ_QUEUE_DEFAULT_MAX_WORKERS", fireworq: "FIREWORQ_QUEUE_DEFAULT_MAX_WORKERS",
			value: (*intValue)(&c.QueueDefaultMaxWorkers), usage: "max_workers of queues created without one"},
		{flag: "queue-default-polling-interval", env: "ROWQ_QUEUE_DEFAULT_POLLING_INTERVAL", fireworq: "FIREWORQ_QUEUE_DEFAULT_POLLING_INTERVAL",
			value: (*intValue)(&c.QueueDefaultPollingInterval), usage: "polling_interval (ms) of queues created without one"},
		{flag: "shutdown-timeout", env: "ROWQ_SHUTDOWN_TIMEOUT", fireworq: "FIREWORQ_SHUTDOWN_TIMEOUT", value: (*durValue)(&c.ShutdownTimeout),
			usage: "how long SIGTERM waits for deliveries in flight", fromFireworq: unitDur(&c.ShutdownTimeout, time.Second)},
		{flag: "config-refresh-interval", env: "ROWQ_CONFIG_REFRESH_INTERVAL", fireworq: "FIREWORQ_CONFIG_REFRESH_INTERVAL", value: (*durValue)(&c.ConfigRefreshInterval),
			usage: "how often a node heartbeats, claims queues and reloads their settings", fromFireworq: unitDur(&c.ConfigRefreshInterval, time.Millisecond)},
		{flag: "node-ttl", env: "ROWQ_NODE_TTL", value: (*durValue)(&c.NodeTTL),
			usage: "how long a silent node keeps its queues before another node takes them (0: 10s, or 1.5s on a Galera cluster, where a node keeps a lease; docs/ha.md)"},
		{flag: "grab-lease", env: "ROWQ_GRAB_LEASE", value: (*durValue)(&c.GrabLease),
			usage: "how long a grabbed job stays held without renewal (renewed every third of it while delivering)"},
		{flag: "rescue-interval", env: "ROWQ_RESCUE_INTERVAL", value: (*durValue)(&c.RescueInterval),
			usage: "how often a queue's dispatcher frees grabs whose holder vanished"},
		{flag: "outbox-idle-poll", env: "ROWQ_OUTBOX_IDLE_POLL", value: (*durValue)(&c.OutboxIdlePoll),
			usage: "wait between probes of an outbox empty for a minute, on MySQL/MariaDB and SQLite (50ms keeps the busy rate)"},
		{flag: "breaker-open", env: "ROWQ_BREAKER_OPEN", value: (*durValue)(&c.BreakerOpen),
			usage: "how long a worker host's circuit breaker first stays open after 5 connection failures or timeouts in a row"},
		{flag: "schedule-misfire-grace", env: "ROWQ_SCHEDULE_MISFIRE_GRACE", value: (*durValue)(&c.ScheduleMisfireGrace),
			usage: "how late a schedule's tick may fire and still be on time; older ticks follow the misfire policy"},
		{flag: "max-body-bytes", env: "ROWQ_MAX_BODY_BYTES", value: (*int64Value)(&c.MaxBodyBytes), usage: "largest request body accepted (413 above)"},
		{flag: "max-result-bytes", env: "ROWQ_MAX_RESULT_BYTES", value: (*intValue)(&c.MaxResultBytes),
			usage: "largest worker result kept in a job's history (a push success over it keeps no result; a completion over it answers 413)"},
		{flag: "dispatch-user-agent", env: "ROWQ_DISPATCH_USER_AGENT", fireworq: "FIREWORQ_DISPATCH_USER_AGENT", value: (*strValue)(&c.DispatchUserAgent),
			usage: "User-Agent of deliveries to workers"},
		{flag: "dispatch-keep-alive", env: "ROWQ_DISPATCH_KEEP_ALIVE", fireworq: "FIREWORQ_DISPATCH_KEEP_ALIVE", value: (*boolValue)(&c.DispatchKeepAlive),
			usage: "reuse connections to workers"},
		{flag: "dispatch-max-conns-per-host", env: "ROWQ_DISPATCH_MAX_CONNS_PER_HOST", fireworq: "FIREWORQ_DISPATCH_MAX_CONNS_PER_HOST",
			value: (*intValue)(&c.DispatchMaxConnsPerHost), usage: "connections per worker host; 0 = no limit"},
		{flag: "dispatch-idle-conn-timeout", env: "ROWQ_DISPATCH_IDLE_CONN_TIMEOUT", fireworq: "FIREWORQ_DISPATCH_IDLE_CONN_TIMEOUT",
			value: (*durValue)(&c.DispatchIdleConnTimeout), usage: "how long an idle worker connection is kept",
			fromFireworq: unitDur(&c.DispatchIdleConnTimeout, time.Second)},
		{flag: "dispatch-handoff", env: "ROWQ_DISPATCH_HANDOFF", value: (*boolValue)(&c.DispatchHandoff),
			usage: "hand a job enqueued on the node that leads its queue straight to its dispatcher when a worker slot is free and nothing is waiting"},
		{flag: "tls-cert", env: "ROWQ_TLS_CERT", value: (*strValue)(&c.TLSCert),
			usage: "PEM certificate (chain) file: serve HTTPS instead of HTTP; SIGHUP reloads it (needs --tls-key)"},
		{flag: "tls-key", env: "ROWQ_TLS_KEY", value: (*strValue)(&c.TLSKey), usage: "PEM private key file of --tls-cert"},
		{flag: "ca-file", env: "ROWQ_CA_FILE", value: (*strValue)(&c.CAFile),
			usage: "PEM file of the certificate authorities trusted when nudging other nodes over HTTPS (default: the system's)"},
		{flag: "worker-url-allow", env: "ROWQ_WORKER_URL_ALLOW", value: (*strValue)(&c.WorkerURLAllow),
			usage: `worker URLs jobs and schedules may name, comma-separated: URL prefixes (https://hooks.example.com/), host globs (*.svc.cluster.local) or CIDRs (10.1.0.0/16); "" allows any http(s) URL`},
		{flag: "worker-deny-private", env: "ROWQ_WORKER_DENY_PRIVATE", value: (*boolValue)(&c.WorkerDenyPrivate),
			usage: "refuse deliveries to loopback and private addresses too (link-local and cloud metadata addresses are always refused)"},
		{flag: "signing-secret", env: "ROWQ_SIGNING_SECRET", value: (*strValue)(&c.SigningSecret),
			usage: "sign deliveries (Standard Webhooks) with these secrets, comma-separated for rotation, each whsec_ and base64 of 24..64 bytes"},
		{flag: "auth", env: "ROWQ_AUTH", value: (*strValue)(&c.Auth),
			usage: "auto (on once a token exists or an admin token is set), on or off: whether API requests need a token"},
		{flag: "admin-token-file", env: "ROWQ_ADMIN_TOKEN_FILE", value: (*strValue)(&c.AdminTokenFile),
			usage: "file holding an admin token (every scope, no database row); or set ROWQ_ADMIN_TOKEN"},
		{flag: "metrics-queue-limit", env: "ROWQ_METRICS_QUEUE_LIMIT", value: (*intValue)(&c.MetricsQueueLimit),
			usage: "the most queues /metrics gives series of their own (rowq_queue_…{queue}); with more queues it gives only the totals over all (rowq_queues_…); 0: totals only"},
		{flag: "otel-endpoint", env: "ROWQ_OTEL_ENDPOINT", value: (*strValue)(&c.OTelEndpoint),
			usage: `export spans of enqueue, grab and delivery to this OTLP/HTTP receiver (http://collector:4318: spans go to /v1/traces); "" exports none`},
		{flag: "node-id", env: "ROWQ_NODE_ID", value: (*strValue)(&c.NodeID), usage: "this node's id (default: host-pid-random)"},
		{flag: "advertise-host", env: "ROWQ_ADVERTISE_HOST", value: (*strValue)(&c.AdvertiseHost), usage: "host:port other nodes reach this node at, for nudges (default: the bound address)"},
		{flag: "log-level", env: "ROWQ_LOG_LEVEL", value: (*strValue)(&c.LogLevel), usage: "debug, info, warn or error"},
		{flag: "log-format", env: "ROWQ_LOG_FORMAT", value: (*strValue)(&c.LogFormat), usage: "text or json"},
	}
}

// Load builds the configuration from defaults, the environment (looked up
// with getenv) and the flags in args.
func Load(fs *flag.FlagSet, args []string, getenv func(string) (string, bool)) (Config, error) {
	c := Default()
	opts := c.options()
	for _, o := range opts {
		if err := o.fromEnv(getenv); err != nil {
			return c, err
		}
	}
	for _, o := range opts {
		o.addFlag(fs)
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if err := c.loadAdminToken(getenv); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// fromEnv sets the option from the Fireworq variable, then from the ROWQ_
// one.
func (o option) fromEnv(getenv func(string) (string, bool)) error {
	if o.fireworq != "" {
		if v, ok := getenv(o.fireworq); ok {
			set := o.value.Set
			if o.fromFireworq != nil {
				set = o.fromFireworq
			}
			if err := set(v); err != nil {
				return fmt.Errorf("%s: %w", o.fireworq, err)
			}
		}
	}
	if v, ok := getenv(o.env); ok {
		if err := o.value.Set(v); err != nil {
			return fmt.Errorf("%s: %w", o.env, err)
		}
	}
	return nil
}

func (o option) addFlag(fs *flag.FlagSet) {
	fs.Var(o.value, o.flag, fmt.Sprintf("%s (env %s)", o.usage, o.env))
}

// DatabaseFlag adds serve's --database-url to fs, with the same
// environment and default, for commands that work on the database
// without a server (rowq token). The URL is read once fs is parsed.
func DatabaseFlag(fs *flag.FlagSet, getenv func(string) (string, bool)) (*string, error) {
	c := Default()
	for _, o := range c.options() {
		if o.flag == "database-url" {
			if err := o.fromEnv(getenv); err != nil {
				return nil, err
			}
			o.addFlag(fs)
		}
	}
	return &c.DatabaseURL, nil
}

// loadAdminToken sets AdminToken from ROWQ_ADMIN_TOKEN or the file
// AdminTokenFile names (not both: which one counts would be a guess).
func (c *Config) loadAdminToken(getenv func(string) (string, bool)) error {
	env, _ := getenv("ROWQ_ADMIN_TOKEN")
	switch {
	case env != "" && c.AdminTokenFile != "":
		return errors.New("admin-token-file and ROWQ_ADMIN_TOKEN are both set: set one")
	case c.AdminTokenFile != "":
		b, err := os.ReadFile(c.AdminTokenFile)
		if err != nil {
			return fmt.Errorf("admin-token-file: %w", err)
		}
		c.AdminToken = strings.TrimSpace(string(b))
		if c.AdminToken == "" {
			return fmt.Errorf("admin-token-file: %s is empty", c.AdminTokenFile)
		}
	default:
		c.AdminToken = env
	}
	return nil
}

// FromEnv is os.LookupEnv, for Load.
func FromEnv(name string) (string, bool) { return os.LookupEnv(name) }

// MaxNodeIDLen bounds a node id: the MySQL store keeps the id of a job's
// holder in a fixed-size column (grabbed_by CHAR(64)) so that a grab
// rewrites the row in place.
const MaxNodeIDLen = 64

// checkHosts checks the host list of a mysql:// or postgres:// URL, which
// may name several hosts (h1:3306,h2:3306), and names the bad host with the
// URL's password hidden.
func checkHosts(databaseURL string) error {
	scheme, _, _ := strings.Cut(databaseURL, "://")
	port := map[string]string{"mysql": "3306", "postgres": "5432", "postgresql": "5432"}[scheme]
	if port == "" {
		return nil
	}
	if _, err := dburl.Parse(databaseURL, port); err != nil {
		return fmt.Errorf("database-url: %w", err)
	}
	return nil
}

// Validate checks every field; its messages name the flag and the range.
func (c *Config) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.Bind != "", "bind: must not be empty")
	check(utf8.RuneCountInString(c.NodeID) <= MaxNodeIDLen, "node-id: at most %d characters, got %d", MaxNodeIDLen, utf8.RuneCountInString(c.NodeID))
	// MySQL compares ids ignoring trailing spaces and drops them from CHAR.
	check(c.NodeID == strings.TrimSpace(c.NodeID), "node-id: must not begin or end with white space, got %q", c.NodeID)
	check(strings.Contains(c.DatabaseURL, "://"), "database-url: want mysql://…, postgres://… or sqlite://path (the value is not shown: it may hold a password)")
	if err := checkHosts(c.DatabaseURL); err != nil {
		errs = append(errs, err)
	}
	check(c.QueueDefaultMaxWorkers >= 1 && c.QueueDefaultMaxWorkers <= 10000, "queue-default-max-workers: must be 1..10000, got %d", c.QueueDefaultMaxWorkers)
	check(c.QueueDefaultPollingInterval >= 1 && c.QueueDefaultPollingInterval <= 3600000, "queue-default-polling-interval: must be 1..3600000 ms, got %d", c.QueueDefaultPollingInterval)
	check(c.ShutdownTimeout >= 0, "shutdown-timeout: must not be negative")
	check(c.ConfigRefreshInterval >= 10*time.Millisecond, "config-refresh-interval: must be at least 10ms, got %v", c.ConfigRefreshInterval)
	check(c.NodeTTL == 0 || c.NodeTTL >= 2*c.ConfigRefreshInterval, "node-ttl: must be 0 (the default) or at least twice config-refresh-interval (%v), got %v", c.ConfigRefreshInterval, c.NodeTTL)
	check(c.GrabLease >= 300*time.Millisecond, "grab-lease: must be at least 300ms, got %v", c.GrabLease)
	check(c.RescueInterval >= 10*time.Millisecond, "rescue-interval: must be at least 10ms, got %v", c.RescueInterval)
	check(c.OutboxIdlePoll >= 50*time.Millisecond && c.OutboxIdlePoll <= 10*time.Second, "outbox-idle-poll: must be 50ms..10s, got %v", c.OutboxIdlePoll)
	check(c.BreakerOpen >= 100*time.Millisecond && c.BreakerOpen <= time.Hour, "breaker-open: must be 100ms..1h, got %v", c.BreakerOpen)
	check(c.ScheduleMisfireGrace >= time.Second && c.ScheduleMisfireGrace <= 24*time.Hour,
		"schedule-misfire-grace: must be 1s..24h, got %v", c.ScheduleMisfireGrace)
	check((c.TLSCert == "") == (c.TLSKey == ""), "tls-cert, tls-key: give both files or neither, got tls-cert %q and tls-key %q", c.TLSCert, c.TLSKey)
	check(c.MaxBodyBytes >= 1024, "max-body-bytes: must be at least 1024, got %d", c.MaxBodyBytes)
	check(c.MaxResultBytes >= 1 && c.MaxResultBytes <= 16<<20, "max-result-bytes: must be 1..16777216 (16 MiB), got %d", c.MaxResultBytes)
	check(c.DispatchMaxConnsPerHost >= 0, "dispatch-max-conns-per-host: must not be negative")
	check(c.MetricsQueueLimit >= 0 && c.MetricsQueueLimit <= 1000000, "metrics-queue-limit: must be 0..1000000, got %d", c.MetricsQueueLimit)
	check(c.DispatchIdleConnTimeout >= 0, "dispatch-idle-conn-timeout: must not be negative")
	if _, err := egress.Parse(c.WorkerURLAllow, c.WorkerDenyPrivate); err != nil {
		check(false, "worker-url-allow: %v", err)
	}
	if _, err := signing.ParseSecrets(c.SigningSecret); err != nil {
		check(false, "signing-secret: %v", err)
	}
	if c.OTelEndpoint != "" {
		if err := tracing.CheckEndpoint(c.OTelEndpoint); err != nil {
			check(false, "otel-endpoint: %v", err) // the URL is not repeated: it may hold a password
		}
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		check(false, "log-level: want debug, info, warn or error, got %q", c.LogLevel)
	}
	check(c.LogFormat == "text" || c.LogFormat == "json", "log-format: want text or json, got %q", c.LogFormat)
	check(c.Auth == auth.ModeAuto || c.Auth == auth.ModeOn || c.Auth == auth.ModeOff, "auth: want auto, on or off, got %q", c.Auth)
	if c.AdminToken != "" {
		if err := auth.CheckAdminSecret(c.AdminToken); err != nil {
			check(false, "admin token (ROWQ_ADMIN_TOKEN or admin-token-file): %v", err)
		}
	}
	return errors.Join(errs...)
}

// MySQLURLFromDSN turns a go-sql-driver DSN (Fireworq's FIREWORQ_MYSQL_DSN,
// such as user:pass@tcp(127.0.0.1:3306)/db?tls=true) into a mysql:// URL.
// The DSN's parameters go along as they are, tls=… among them, so a
// deployment that asked for TLS keeps it.
func MySQLURLFromDSN(dsn string) (string, error) {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("not a MySQL DSN: %w", err)
	}
	if cfg.Net != "tcp" {
		return "", fmt.Errorf("only tcp(host:port) MySQL addresses are supported, got %s", cfg.Net)
	}
	u := "mysql://"
	if cfg.User != "" {
		u += urlEscape(cfg.User)
		if cfg.Passwd != "" {
			u += ":" + urlEscape(cfg.Passwd)
		}
		u += "@"
	}
	u += cfg.Addr + "/" + cfg.DBName
	// As the driver reads it: the parameters follow the first '?' after
	// the last '/'.
	if _, params, ok := strings.Cut(dsn[strings.LastIndex(dsn, "/")+1:], "?"); ok && params != "" {
		u += "?" + params
	}
	return u, nil
}

func urlEscape(s string) string {
	r := strings.NewReplacer("%", "%25", ":", "%3A", "@", "%40", "/", "%2F", "?", "%3F", "#", "%23")
	return r.Replace(s)
}

type strValue string

func (v *strValue) String() string     { return string(*v) }
func (v *strValue) Set(s string) error { *v = strValue(s); return nil }

type intValue int

func (v *intValue) String() string { return strconv.Itoa(int(*v)) }
func (v *intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("want an integer, got %q", s)
	}
	*v = intValue(n)
	return nil
}

type int64Value int64

func (v *int64Value) String() string { return strconv.FormatInt(int64(*v), 10) }
func (v *int64Value) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("want an integer, got %q", s)
	}
	*v = int64Value(n)
	return nil
}

type boolValue bool

func (v *boolValue) String() string   { return strconv.FormatBool(bool(*v)) }
func (v *boolValue) IsBoolFlag() bool { return true }
func (v *boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false, got %q", s)
	}
	*v = boolValue(b)
	return nil
}

type durValue time.Duration

func (v *durValue) String() string { return time.Duration(*v).String() }
func (v *durValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 500ms, 30s or 1m, got %q", s)
	}
	*v = durValue(d)
	return nil
}

// unitDur parses Fireworq's bare-integer durations in the given unit.
func unitDur(d *time.Duration, unit time.Duration) func(string) error {
	return func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer (%v), got %q", unit, s)
		}
		*d = time.Duration(n) * unit
		return nil
	}
}

// Settings lists the effective configuration by flag name, with the
// database password masked, for GET /settings and the start-up log.
func (c Config) Settings(redact func(string) string) map[string]string {
	out := map[string]string{}
	for _, o := range c.options() {
		out[o.flag] = o.value.String()
	}
	out["database-url"] = redact(c.DatabaseURL)
	out["signing-secret"] = maskSecrets(c.SigningSecret)
	return out
}

// maskSecrets shows comma-separated secrets as one "xxxxx" each, so that
// /settings tells how many are set and never what they are.
func maskSecrets(s string) string {
	var n int
	for e := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(e) != "" {
			n++
		}
	}
	return strings.TrimSuffix(strings.Repeat("xxxxx,", n), ",")
}
