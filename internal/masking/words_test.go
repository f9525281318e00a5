package masking

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestScoreGolden checks the four statistics against values worked out by
// hand (the comment of each case shows the word sets).
func TestScoreGolden(t *testing.T) {
	tests := []struct {
		name     string
		act, obs string
		want     Stats
	}{
		{
			// A={ls}, O={ls,a,b} (with repetition 4 words)
			name: "terminal echo plus output", act: "ls", obs: "ls\na b a",
			want: Stats{OL: 1, Nov: 2.0 / 3, Jac: 1.0 / 3, R: 4, ActWords: 1, ObsWords: 4, ActDistinct: 1, ObsDistinct: 3, Shared: 1},
		},
		{
			name: "both empty", act: "", obs: "",
			want: Stats{OL: 0, Nov: 0, Jac: 0, R: 0},
		},
		{
			// no action words: OL defined 0, R = obs words / 1
			name: "empty action", act: "  []  ", obs: "done ok",
			want: Stats{OL: 0, Nov: 1, Jac: 0, R: 2, ObsWords: 2, ObsDistinct: 2},
		},
		{
			// no observation words: Nov defined 0
			name: "empty observation", act: "rm -rf build", obs: "{}",
			want: Stats{OL: 0, Nov: 0, Jac: 0, R: 0, ActWords: 3, ActDistinct: 3},
		},
		{
			name: "single identical word", act: "Hello", obs: "hello",
			want: Stats{OL: 1, Nov: 0, Jac: 1, R: 1, ActWords: 1, ObsWords: 1, ActDistinct: 1, ObsDistinct: 1, Shared: 1},
		},
		{
			name: "single different word", act: "open", obs: "closed",
			want: Stats{OL: 0, Nov: 1, Jac: 0, R: 1, ActWords: 1, ObsWords: 1, ActDistinct: 1, ObsDistinct: 1},
		},
		{
			// Unicode: A={café,東京,straße}; O={café,東京,ß,ok}. "ß" alone is a
			// word; "Straße" lower-cases to straße, not strasse.
			name: "unicode letters", act: "Café 東京 Straße", obs: "CAFÉ, 東京! ß ok",
			want: Stats{OL: 2.0 / 3, Nov: 0.5, Jac: 2.0 / 5, R: 4.0 / 3, ActWords: 3, ObsWords: 4, ActDistinct: 3, ObsDistinct: 4, Shared: 2},
		},
		{
			// digits and underscore join words; hyphen and dot split them;
			// Greek capitals lower-case letter by letter (ΟΔΟΣ → οδοσ).
			name: "digits underscores greek", act: "file_2 v1.2 ΟΔΟΣ", obs: "FILE_2 v1 2 οδοσ x-y",
			// A={file_2,v1,2,οδοσ} O={file_2,v1,2,οδοσ,x,y}
			want: Stats{OL: 1, Nov: 2.0 / 6, Jac: 4.0 / 6, R: 6.0 / 4, ActWords: 4, ObsWords: 6, ActDistinct: 4, ObsDistinct: 6, Shared: 4},
		},
		{
			// emoji, symbols and superscripts are separators; Arabic-Indic
			// digits (Nd) are word characters; U+2028 separates.
			name: "symbols and other digits", act: "go🚀run x²", obs: "٣٤٥\u2028run",
			// A={go,run,x} O={٣٤٥,run}
			want: Stats{OL: 1.0 / 3, Nov: 0.5, Jac: 1.0 / 4, R: 2.0 / 3, ActWords: 3, ObsWords: 2, ActDistinct: 3, ObsDistinct: 2, Shared: 1},
		},
		{
			// record format markers are not content: A={ls}, O={}
			name: "record markers removed", act: "### Turn 12\n**Action:**\nls", obs: "**Environment Observation:**\n",
			want: Stats{OL: 0, Nov: 0, Jac: 0, R: 0, ActWords: 1, ActDistinct: 1},
		},
		{
			// only a leading marker goes; a heading without its number stays
			name: "markers only as prefix", act: "### Turn x\n**Action:** ls", obs: "ok **Environment Observation:**",
			// A={turn,x,action,ls} O={ok,environment,observation}
			want: Stats{OL: 0, Nov: 1, Jac: 0, R: 3.0 / 4, ActWords: 4, ObsWords: 3, ActDistinct: 4, ObsDistinct: 3},
		},
		{
			// repetition counts for R but not for the sets
			name: "repetition", act: "a a a a", obs: "a",
			want: Stats{OL: 1, Nov: 0, Jac: 1, R: 0.25, ActWords: 4, ObsWords: 1, ActDistinct: 1, ObsDistinct: 1, Shared: 1},
		},
	}
	var sc Scorer
	approx := cmpopts.EquateApprox(0, 1e-12)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sc.Score(tt.act, tt.obs)
			if d := cmp.Diff(tt.want, got, approx); d != "" {
				t.Errorf("Score(%q, %q) (-want +got):\n%s", tt.act, tt.obs, d)
			}
			a, _ := json.Marshal(tt.act)
			o, _ := json.Marshal(tt.obs)
			raw := sc.ScoreJSON(a[1:len(a)-1], o[1:len(o)-1])
			if d := cmp.Diff(got, raw); d != "" {
				t.Errorf("ScoreJSON differs from Score (-Score +ScoreJSON):\n%s", d)
			}
		})
	}
}

func TestWords(t *testing.T) {
	got := Words("Hello, WORLD_1 hello ñandú 東京タワー x²")
	want := []string{"hello", "world_1", "ñandú", "東京タワー", "x"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
}

// TestScoreJSONEscapes feeds escape-heavy literals, including \u escapes of
// letters and surrogate pairs, through both paths.
func TestScoreJSONEscapes(t *testing.T) {
	var sc Scorer
	cases := [][2]string{
		{`caf\u00e9 \"quoted\" tab\there`, `CAF\u00C9\nnew`},
		{`\ud83d\ude80rocket \ud800lone`, `rocket\/slash \\back`},
		{`\u0041BC`, `abc`},
		{`x\u2028y`, `y\u00b2`},
		{`\ude00lone\ud83d\u00e9t\ud83d\ud83d\ude80`, `\uD83D\uDE80 \u00C9T\ud83dlone`},
	}
	for _, c := range cases {
		var a, o string
		if err := json.Unmarshal([]byte(`"`+c[0]+`"`), &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(`"`+c[1]+`"`), &o); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(sc.Score(a, o), sc.ScoreJSON([]byte(c[0]), []byte(c[1]))); d != "" {
			t.Errorf("%q: %s", c, d)
		}
	}
}

// FuzzScoreJSON: the raw-literal path must equal scoring decoded text.
func FuzzScoreJSON(f *testing.F) {
	f.Add("ls -la", "total 0\nroot@x:/# ")
	f.Add("Café 東京", `{"a":"\u00e9"}`)
	f.Add("\xed\xa0\x80 x", "ΟΔΟΣ İ")
	f.Add(`[{"keystrokes": "cd src\n", "duration": 0.1}]`, "$ cd src\n$ ")
	f.Add(`{"name": "f", "arguments": {"q": "caf\u00e9", "n": -1.5e3}}`, "ok")
	f.Add(`{"keystrokes": {"a": ["b"]}, "k": "x"}`, "b")
	f.Fuzz(func(t *testing.T, a, o string) {
		var sc Scorer
		ab, _ := json.Marshal(a)
		ob, _ := json.Marshal(o)
		var da, do string
		_ = json.Unmarshal(ab, &da)
		_ = json.Unmarshal(ob, &do)
		want := sc.Score(da, do)
		got := sc.ScoreJSON(ab[1:len(ab)-1], ob[1:len(ob)-1])
		if want != got {
			t.Fatalf("Score %+v != ScoreJSON %+v for %q / %q", want, got, a, o)
		}
		for _, x := range []float64{got.OL, got.Nov, got.Jac, got.R} {
			if math.IsNaN(x) || x < 0 {
				t.Fatalf("bad statistic %v", got)
			}
		}
		if got.OL > 1 || got.Nov > 1 || got.Jac > 1 {
			t.Fatalf("fraction above 1: %+v", got)
		}
		if strings.TrimSpace(a) == "" && got.ActWords != 0 {
			t.Fatalf("blank action has words: %+v", got)
		}
	})
}

// BenchmarkScoreJSON scores a terminal turn straight from its JSON
// literals, escapes decoded on the fly (json.Marshal writes < and > as \u
// escapes), the way `agentworld data mask` scores every turn of a corpus.
//
//	go test -run '^$' -bench ScoreJSON -benchmem ./internal/masking
func BenchmarkScoreJSON(b *testing.B) {
	action := "### Turn 3\n**Action:**\ngrep -rn \"TODO\" src/ | head -20 && echo \"done — ünïcødé\""
	line := "src/app/main.go:42:\t// TODO: handle the \"empty\" <b>case</b> → 数据 \U0001F680\r\n"
	a, err := json.Marshal(action)
	if err != nil {
		b.Fatal(err)
	}
	o, err := json.Marshal("**Environment Observation:**\n" + strings.Repeat(line, 40))
	if err != nil {
		b.Fatal(err)
	}
	a, o = a[1:len(a)-1], o[1:len(o)-1]
	var sc Scorer
	b.SetBytes(int64(len(a) + len(o)))
	b.ReportAllocs()
	for b.Loop() {
		if st := sc.ScoreJSON(a, o); st.ObsWords == 0 {
			b.Fatal("no words")
		}
	}
}
