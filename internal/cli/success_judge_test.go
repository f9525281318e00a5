package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/testkit/fakellm"
)

// judgedWorld writes a world spec whose success a model judges.
func judgedWorld(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	spec := "domain: terminal\ntask_description: Create hello.txt.\naction_space: keystrokes\n" +
		"reward:\n  success:\n    judge:\n      criterion: hello.txt was created\n"
	if err := os.WriteFile(filepath.Join(dir, "judged.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestServeSuccessJudge serves a world with a judged success criterion
// against a fake world model and a fake success judge: an episode the
// judge calls a success ends with reward 1, one it calls a failure with 0,
// on the native API and on OpenEnv /step.
func TestServeSuccessJudge(t *testing.T) {
	wm := fakellm.New(func(*fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Content: "<predicted_observation>$</predicted_observation>"}
	})
	defer wm.Close()
	judge := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		ok := strings.Contains(r.Messages[len(r.Messages)-1].Content, "touch hello.txt")
		return fakellm.Reply{Content: `<verdict>{"success": ` + map[bool]string{true: "true", false: "false"}[ok] + `, "reason": "judged"}</verdict>`}
	})
	defer judge.Close()
	dir := judgedWorld(t)
	_, srv := startTestServe(t, func(f *simFlags) {
		f.cfg.Model, f.cfg.ModelName, f.cfg.MaxTokens, f.cfg.WorldsDir = wm.URL, "wm", 256, dir
		f.successJudge.url, f.successJudge.model = judge.URL, "judge"
	})
	type stepReply struct {
		Reward float64 `json:"reward"`
		Info   struct {
			RewardComponents map[string]float64 `json:"reward_components"`
		} `json:"info"`
		Metadata struct {
			RewardComponents map[string]float64 `json:"reward_components"`
		} `json:"metadata"`
	}
	native := func(action string) (last stepReply) {
		nativeEpisode(t, srv.URL, "judged", []string{action, "[]"}, &last)
		return last
	}
	openEnv := func(action string) (last stepReply) {
		openEnvEpisode(t, srv.URL, "judged", []string{action, "[]"}, &last)
		last.Info.RewardComponents = last.Metadata.RewardComponents
		return last
	}
	for _, tc := range []struct {
		action string
		want   float64
	}{{`[{"keystrokes":"touch hello.txt\n"}]`, 1}, {`[{"keystrokes":"ls\n"}]`, 0}} {
		for api, run := range map[string]func(string) stepReply{"native": native, "openenv": openEnv} {
			got := run(tc.action)
			if got.Reward != tc.want || got.Info.RewardComponents["success"] != tc.want || len(got.Info.RewardComponents) != 1 {
				t.Errorf("%s, action %q: reward %v, components %v; want %v from the judge", api, tc.action, got.Reward, got.Info.RewardComponents, tc.want)
			}
		}
	}
	if judge.Count() != 4 {
		t.Errorf("judge called %d times, want once per episode (4)", judge.Count())
	}
}

// TestServeRefusesJudgedWorldWithoutJudge: a loaded world declaring a
// judged criterion stops serve at startup, naming the field and the flag;
// half a judge configuration is refused too.
func TestServeRefusesJudgedWorldWithoutJudge(t *testing.T) {
	dir := judgedWorld(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--worlds", dir}, []string{"--success-judge-url", `world "judged" declares reward.success.judge`}},
		{[]string{"--success-judge-url", "http://127.0.0.1:1/v1"}, []string{"--success-judge-model"}},
	} {
		_, _, err := runCLI(t, append([]string{"serve", "--no-db", "--addr", "127.0.0.1:0"}, tc.args...)...)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("serve %v: error %v, want one saying %s", tc.args, err, w)
			}
		}
	}
}
