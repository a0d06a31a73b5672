// Package deploy checks what deploy/ ships for operators: the Prometheus alert rules pass
// promtool's check and their unit tests, the Grafana dashboard's queries parse, and every
// metric the dashboard and the rules name is one the server exports.
package deploy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
)

const (
	rulesDir  = "../../deploy/prometheus"
	dashboard = "../../deploy/grafana/rushgate.json"
)

// promtool runs promtool with args in dir and fails the test with its output when it fails.
func promtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(testenv.Promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestAlertRules_PassPromtoolCheckAndTheirUnitTests(t *testing.T) {
	out := promtool(t, rulesDir, "check", "rules", "rules.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules: %s", out)
	}
	out = promtool(t, rulesDir, "test", "rules", "rules_test.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules: %s", out)
	}
	// Every alert has a test: a rule nobody tested may never fire.
	tests, err := os.ReadFile(filepath.Join(rulesDir, "rules_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, alert := range ruleAlerts(t) {
		if !strings.Contains(string(tests), "alertname: "+alert+"\n") {
			t.Errorf("alert %s has no case in rules_test.yml", alert)
		}
	}
}

// TestDashboard_QueriesParse has promtool check every query of the dashboard, as recording
// rules with Grafana's $__rate_interval set to 5m.
func TestDashboard_QueriesParse(t *testing.T) {
	exprs := dashboardExprs(t)
	if len(exprs) < 40 {
		t.Fatalf("the dashboard has %d queries: not read right", len(exprs))
	}
	var rules []map[string]string
	for i, e := range exprs {
		rules = append(rules, map[string]string{
			"record": fmt.Sprintf("dashboard:query%d", i),
			"expr":   strings.ReplaceAll(e, "$__rate_interval", "5m"),
		})
	}
	// JSON is YAML, which promtool reads.
	file, err := json.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard.yml"), file, 0o600); err != nil {
		t.Fatal(err)
	}
	promtool(t, dir, "check", "rules", "dashboard.yml")
}

// TestDashboardAndRules_NameOnlyMetricsTheServerExports starts the server on the embedded
// default, serves a crew join (so the request and lock histograms have series), and compares
// every rushgate_ name in the dashboard and the rules with what its registry exports: the
// families gathered (a histogram as its _bucket, _sum and _count) and every collector's
// descriptor (the labelled ones that have no series yet).
func TestDashboardAndRules_NameOnlyMetricsTheServerExports(t *testing.T) {
	exported := serverMetrics(t)
	rules, err := os.ReadFile(filepath.Join(rulesDir, "rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string][]string{
		"deploy/grafana/rushgate.json":     metricNames(strings.Join(dashboardExprs(t), "\n")),
		"deploy/prometheus/rules.yml":      metricNames(string(rules)),
		"deploy/prometheus/rules_test.yml": metricNames(readFile(t, filepath.Join(rulesDir, "rules_test.yml"))),
	}
	for file, names := range named {
		if len(names) == 0 {
			t.Fatalf("%s names no rushgate_ metric: not read right", file)
		}
		for _, name := range names {
			if _, ok := exported[name]; !ok {
				t.Errorf("%s names %s, which the server does not export", file, name)
			}
		}
	}
	// The rules watch what the issue asks for.
	for _, want := range []string{"rushgate_outbox_failed", "rushgate_outbox_relay_last_round_timestamp_seconds",
		"rushgate_queue_dispatcher_last_tick_timestamp_seconds", "rushgate_queue_broker_last_heartbeat_timestamp_seconds",
		"rushgate_http_request_duration_seconds_bucket", "rushgate_http_request_duration_seconds_count", "rushgate_lock_exhausted_total"} {
		if !slices.Contains(named["deploy/prometheus/rules.yml"], want) {
			t.Errorf("rules.yml does not watch %s", want)
		}
	}
}

// unsetGauges lists the names among names whose gauge is missing or 0 in families.
func unsetGauges(families []*dto.MetricFamily, names []string) []string {
	var unset []string
	for _, name := range names {
		i := slices.IndexFunc(families, func(f *dto.MetricFamily) bool { return f.GetName() == name })
		if i < 0 || len(families[i].GetMetric()) == 0 || families[i].GetMetric()[0].GetGauge().GetValue() == 0 {
			unset = append(unset, name)
		}
	}
	return unset
}

// descName reads a descriptor's name from its String form, Desc{fqName: "…", …}, the only
// place a Desc shows it.
var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

var metricName = regexp.MustCompile(`\brushgate_[a-z0-9_]+`)

// metricNames lists the distinct rushgate_ names in text.
func metricNames(text string) []string {
	names := metricName.FindAllString(text, -1)
	slices.Sort(names)
	return slices.Compact(names)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// dashboardExprs lists the queries of every panel of the dashboard.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	var d struct {
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(readFile(t, dashboard)), &d); err != nil {
		t.Fatalf("%s: %v", dashboard, err)
	}
	var exprs []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			exprs = append(exprs, target.Expr)
		}
	}
	return exprs
}

var alertRule = regexp.MustCompile(`(?m)^\s*- alert: (\S+)$`)

// ruleAlerts lists the alerts rules.yml defines.
func ruleAlerts(t *testing.T) []string {
	t.Helper()
	var alerts []string
	for _, m := range alertRule.FindAllStringSubmatch(readFile(t, filepath.Join(rulesDir, "rules.yml")), -1) {
		alerts = append(alerts, m[1])
	}
	if len(alerts) < 9 {
		t.Fatalf("rules.yml: %d alerts read, %v: not read right", len(alerts), alerts)
	}
	return alerts
}

// serverMetrics runs the server on the embedded default, has it serve a crew and a join, and
// answers every metric name its registry exports.
func serverMetrics(t *testing.T) map[string]struct{} {
	t.Helper()
	const secret = "deploy-test-secret-deploy-test-secret"
	cfg := bootstrap.DefaultConfig()
	cfg.Server.Addr = "127.0.0.1:0"
	cfg.Server.LogLevel = "error"
	cfg.Auth.JWTSecret = secret
	cfg.Storage.DataDir = t.TempDir()
	// Short periods, so the relay, the dispatcher and the broker each record a round soon.
	cfg.Outbox.Interval, cfg.Queue.Tick = 20*time.Millisecond, 20*time.Millisecond
	var (
		srv *bootstrap.Server
		reg *prometheus.Registry
	)
	app := fxtest.New(t, bootstrap.Modules(cfg), fx.Populate(&srv, &reg))
	app.RequireStart()
	t.Cleanup(app.RequireStop)

	tokens := rghttp.NewTokens([]byte(secret))
	call := func(path string, role rghttp.Role, user, body string) map[string]any {
		token, err := tokens.Mint(user, role, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, srv.URL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "deploy-"+path)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(res.Body).Decode(&out)
		if res.StatusCode/100 != 2 {
			t.Fatalf("POST %s: %d %v", path, res.StatusCode, out)
		}
		return out
	}
	crew := call("/crews", rghttp.RoleAdmin, "admin", `{"name":"deploy","maxMembers":2}`)
	call(fmt.Sprintf("/crews/%v/join", crew["id"]), rghttp.RoleUser, "u1", "")

	// The alerts age these timestamps: each role running sets its own, within a few periods
	// (the bound is generous for a loaded machine).
	liveness := []string{"rushgate_outbox_relay_last_round_timestamp_seconds",
		"rushgate_queue_dispatcher_last_tick_timestamp_seconds", "rushgate_queue_broker_last_heartbeat_timestamp_seconds"}
	var families []*dto.MetricFamily
	for deadline := time.Now().Add(500 * cfg.Queue.Tick); ; time.Sleep(cfg.Queue.Tick) {
		var err error
		if families, err = reg.Gather(); err != nil {
			t.Fatal(err)
		}
		unset := unsetGauges(families, liveness)
		if len(unset) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still 0 after %v: %v", 500*cfg.Queue.Tick, unset)
		}
	}
	exported := make(map[string]struct{})
	for _, f := range families {
		exported[f.GetName()] = struct{}{}
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				exported[f.GetName()+suffix] = struct{}{}
			}
		}
	}
	descs := make(chan *prometheus.Desc)
	go func() {
		reg.Describe(descs)
		close(descs)
	}()
	for d := range descs {
		if m := descName.FindStringSubmatch(d.String()); m != nil {
			exported[m[1]] = struct{}{}
		}
	}
	return exported
}

// routeFilter is a dashboard query's selection of routes: route=~"…".
var routeFilter = regexp.MustCompile(`route=~"([^"]+)"`)

// TestDashboard_ShowsEveryFlowsRoutes: every route of openapi.yaml but the operational ones is
// selected by some panel's route=~ filter, so a flow added without its dashboard row fails here.
func TestDashboard_ShowsEveryFlowsRoutes(t *testing.T) {
	var filters []*regexp.Regexp
	for _, expr := range dashboardExprs(t) {
		for _, m := range routeFilter.FindAllStringSubmatch(expr, -1) {
			filters = append(filters, regexp.MustCompile("^(?:"+m[1]+")$")) // PromQL anchors its regexps
		}
	}
	paths := regexp.MustCompile(`(?m)^  (/\S*):$`).FindAllStringSubmatch(readFile(t, "../../adapters/http/openapi.yaml"), -1)
	if len(paths) < 30 {
		t.Fatalf("openapi.yaml: %d paths read: not read right", len(paths))
	}
	operational := []string{"/healthz", "/readyz", "/metrics", "/openapi.yaml"}
	param := regexp.MustCompile(`\{(\w+)\}`)
	for _, m := range paths {
		route := param.ReplaceAllString(m[1], ":$1") // the route label is gin's template
		if slices.Contains(operational, route) {
			continue
		}
		if !slices.ContainsFunc(filters, func(f *regexp.Regexp) bool { return f.MatchString(route) }) {
			t.Errorf("no dashboard panel selects route %s", route)
		}
	}
}
