package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/httpedge"
	"github.com/agentworld/agentworld/internal/reward"
	"github.com/agentworld/agentworld/internal/sim"
)

// TestSettingFlagsAreRealSettingsAndFlags: every setting the servers'
// errors may name is a field of the options it comes from, and maps to a
// flag the command has, so a renamed field or flag fails here.
func TestSettingFlagsAreRealSettingsAndFlags(t *testing.T) {
	for _, tc := range []struct {
		cmd     *cobra.Command
		flags   map[string]string
		options []any
	}{
		{newServeCmd(), serveSettingFlags, []any{httpedge.Edge{}, sim.Options{}}},
		{newRewardServeCmd(), rewardSettingFlags, []any{httpedge.Edge{}, reward.HandlerOptions{}}},
	} {
		for setting, flag := range tc.flags {
			found := false
			for _, o := range tc.options {
				_, ok := reflect.TypeOf(o).FieldByName(setting)
				found = found || ok
			}
			if !found {
				t.Errorf("%s: setting %q is no field of %T", tc.cmd.Name(), setting, tc.options)
			}
			if tc.cmd.Flags().Lookup(flag) == nil {
				t.Errorf("%s: setting %q maps to --%s, which the command lacks", tc.cmd.Name(), setting, flag)
			}
		}
	}
}

// TestSettingErrorsNameTheirFlag is the table from a refusal a setting
// decided, raised by the real packages through the real servers, to the
// flag its message names: the library errors carry the setting, the
// command's table turns it into its flag.
func TestSettingErrorsNameTheirFlag(t *testing.T) {
	_, serve := startTestServe(t, func(f *simFlags) {
		f.cfg.MaxInlineSpecBytes, f.cfg.MaxInlineTools, f.cfg.MaxSessionBytes = 4000, 1, 3000
	})
	rs, err := reward.New(&reward.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rh, err := reward.NewHandler(rs, &reward.HandlerOptions{MaxBatch: 1,
		Edge: httpedge.Edge{Hints: settingHints("reward serve", rewardSettingFlags)}})
	if err != nil {
		t.Fatal(err)
	}
	rsrv := httptest.NewServer(rh)
	defer rsrv.Close()

	inline := func(extra string) string {
		return `{"world": {"domain": "terminal", "task_description": "t", "action_space": "keys"` + extra + `}}`
	}
	type reply struct {
		Status int
		Field  string
		Hint   string
	}
	for _, tc := range []struct {
		name, base, path, body string
		header                 map[string]string
		want                   reply
	}{
		{"rebinding Host", serve.URL, "/v1/worlds", "", map[string]string{"Host": "evil.example"},
			reply{403, "Host", "set by serve --allowed-hosts"}},
		{"cross-origin page", serve.URL, "/v1/worlds", "", map[string]string{"Origin": "https://evil.example"},
			reply{403, "Origin", "set by serve --allowed-origins"}},
		{"large inline spec", serve.URL, "/v1/sessions", inline(`, "name": "` + strings.Repeat("x", 5000) + `"`), nil,
			reply{413, "world", "set by serve --max-inline-spec-bytes"}},
		{"inline tools", serve.URL, "/v1/sessions", `{"world": {"domain": "mcp", "task_description": "t", "action_space": {"tools": [{"name": "a"}, {"name": "b"}]}}}`, nil,
			reply{413, "world.action_space.tools", "set by serve --max-inline-tools"}},
		{"extra_body", serve.URL, "/v1/sessions", inline(`, "sampling": {"extra_body": {"top_k": 5}}`), nil,
			reply{400, "world.sampling.extra_body.top_k", "set by serve --allow-extra-body"}},
		{"model", serve.URL, "/v1/sessions", `{"world": {"domain": "terminal", "task_description": "t", "action_space": "keys"}, "model": "gpt-4o"}`, nil,
			reply{400, "model", "set by serve --allow-model"}},
		{"success judge", serve.URL, "/v1/sessions", inline(`, "reward": {"success": {"judge": {"criterion": "done"}}}`), nil,
			reply{400, "world.reward.success.judge", "set by serve --success-judge-url"}},
		{"session size", serve.URL, "/v1/sessions", inline(`, "name": "` + strings.Repeat("x", 3000) + `"`), nil,
			reply{413, "world", "set by serve --max-session-bytes"}},
		{"reward: rebinding Host", rsrv.URL, reward.BatchPath, `{"items": []}`, map[string]string{"Host": "evil.example"},
			reply{403, "Host", "set by reward serve --allowed-hosts"}},
		{"reward: batch size", rsrv.URL, reward.BatchPath, `{"items": [{"response": "a"}, {"response": "b"}]}`, nil,
			reply{413, "", "set by reward serve --max-batch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, tc.base+tc.path, nil)
			if tc.body != "" {
				req, _ = http.NewRequest(http.MethodPost, tc.base+tc.path, strings.NewReader(tc.body))
			}
			req.Header.Set("Content-Type", "application/json")
			for k, v := range tc.header {
				if k == "Host" {
					req.Host = v
				} else {
					req.Header.Set(k, v)
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e struct {
				Error struct {
					Message, Field string
				}
			}
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatal(err)
			}
			got := reply{resp.StatusCode, e.Error.Field, ""}
			if i := strings.LastIndex(e.Error.Message, "("); i >= 0 && strings.HasSuffix(e.Error.Message, ")") {
				got.Hint = e.Error.Message[i+1 : len(e.Error.Message)-1]
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", e.Error.Message, diff)
			}
			if strings.Count(e.Error.Message, " --") != 1 {
				t.Errorf("message %q names flags other than its setting's", e.Error.Message)
			}
		})
	}
}
