package bootstrap

import (
	"strings"
	"testing"

	"github.com/caarlos0/env/v11"
)

// TestTracingConfig_TheStandardVariablesSayWhereSpansGo: the traces endpoint as given, else
// /v1/traces under the base endpoint, else nowhere; OTEL_SDK_DISABLED wins.
func TestTracingConfig_TheStandardVariablesSayWhereSpansGo(t *testing.T) {
	cases := []struct {
		environment map[string]string
		want        string
	}{
		{map[string]string{}, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "http://collector:4318/v1/traces"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector/otlp/"}, "https://collector/otlp/v1/traces"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:4318/custom"}, "http://traces:4318/custom"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, ""},
	}
	for _, c := range cases {
		cfg, err := parseConfig(env.Options{Environment: c.environment})
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%v: %v", c.environment, err)
		}
		if got := cfg.Tracing.tracesURL(); got != c.want {
			t.Errorf("%v: spans go to %q, want %q", c.environment, got, c.want)
		}
	}
}

func TestTracingConfig_AnEndpointThatIsNoURLIsRefusedByName(t *testing.T) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		cfg, err := parseConfig(env.Options{Environment: map[string]string{name: "collector:4318"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), name+": ") {
			t.Errorf("%s=collector:4318: got %v, want an error naming it", name, err)
		}
	}
}
