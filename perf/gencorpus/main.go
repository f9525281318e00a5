// Command gencorpus writes a synthetic corpus of unified trajectories that
// looks like real agent data of the seven domains: terminal screens, search
// results, JSON tool results, diffs and test logs, view hierarchies and
// accessibility trees, with Unicode text (accents, CJK, Greek, Cyrillic,
// emoji, U+2028) and the escapes JSON needs. It drives perf/mask_ratio.sh.
//
//	go run ./perf/gencorpus -size 100MB -seed 1 > corpus.jsonl
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
)

func main() {
	size := flag.String("size", "100MB", "approximate output size (KB, MB, GB suffixes)")
	seed := flag.Uint64("seed", 1, "random seed; the same seed gives the same corpus")
	flag.Parse()
	target, err := parseSize(*size)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	g := &gen{r: rand.New(rand.NewPCG(*seed, 0x5eed))}
	var written int64
	for i := 0; written < target; i++ {
		b, err := json.Marshal(g.trajectory(i))
		if err != nil {
			panic(err)
		}
		b = append(b, '\n')
		if _, err := w.Write(b); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		written += int64(len(b))
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	u := strings.ToUpper(s)
	for suf, m := range map[string]int64{"KB": 1e3, "MB": 1e6, "GB": 1e9} {
		if strings.HasSuffix(u, suf) {
			mult, u = m, strings.TrimSuffix(u, suf)
		}
	}
	n, err := strconv.ParseFloat(u, 64)
	if err != nil {
		return 0, fmt.Errorf("bad -size %q", s)
	}
	return int64(n * float64(mult)), nil
}

type turn struct {
	Action      string `json:"action"`
	Observation string `json:"observation"`
}

type traj struct {
	ID           string `json:"id"`
	Domain       string `json:"domain"`
	Source       string `json:"source"`
	SystemPrompt string `json:"system_prompt"`
	Turns        []turn `json:"turns"`
}

type gen struct{ r *rand.Rand }

var (
	english = strings.Fields(`the of and to in is for on with as by from that this file error value user data
		request response server client config test build module package function return status result
		page search open click button input form list item table row column name path directory process
		memory network timeout retry update create delete read write install version release branch commit`)
	foreign = strings.Fields(`café naïve résumé straße größe façade déjà über año niño crème 東京 数据 服务器
		配置 错误 文件 検索 結果 ファイル 서버 데이터 Москва данные ошибка файл αλφα δεδομένα λάθος Ωμέγα
		ΑΘΗΝΑ ΟΔΟΣ İstanbul ıslak şehir Ärger Öl Ñandú ĳssel ﬁle ２０２６ ٣٤٥ १२३`)
	symbols = []string{"✅", "🚀", "→", "—", "•", "©", "½", "²", "\u2028", "\t", "…", "«", "»", "\"", "\\", "<", ">", "&"}
	cmds    = []string{"ls -la", "cat README.md", "git status", "go test ./...", "python3 app.py", "grep -rn TODO src", "make build", "pip install requests", "cd /srv/app", "echo $HOME"}
	domains = []string{"mcp", "search", "terminal", "swe", "android", "web", "os"}
)

func (g *gen) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

func (g *gen) words(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			if g.r.IntN(12) == 0 {
				b.WriteString(g.pick(symbols))
			} else {
				b.WriteByte(' ')
			}
		}
		switch k := g.r.IntN(20); {
		case k == 0:
			b.WriteString(g.pick(foreign))
		case k == 1:
			b.WriteString(strconv.Itoa(g.r.IntN(100000)))
		case k == 2:
			b.WriteString(strings.ToUpper(g.pick(english)))
		case k == 3:
			b.WriteString(g.pick(english) + "_" + g.pick(english))
		default:
			b.WriteString(g.pick(english))
		}
	}
	return b.String()
}

func (g *gen) trajectory(i int) traj {
	d := domains[g.r.IntN(len(domains))]
	t := traj{
		ID:           fmt.Sprintf("%s-%07d", d, i),
		Domain:       d,
		Source:       "synthetic",
		SystemPrompt: "You simulate a " + d + " environment. " + g.words(60+g.r.IntN(200)),
	}
	n := 3 + g.r.IntN(25)
	for k := 1; k <= n; k++ {
		act, obs := g.turn(d)
		// The published record format, as the benchmark data has it.
		t.Turns = append(t.Turns, turn{Action: conversation.ActionPrompt(k, act), Observation: conversation.ObservationResponse(obs)})
	}
	return t
}

// turn makes one transition as a bare action and observation; the mix
// covers every masking category.
func (g *gen) turn(d string) (string, string) {
	switch g.r.IntN(10) {
	case 0: // echo: the observation repeats the action
		a := g.words(5 + g.r.IntN(30))
		return a, "ok " + a
	case 1: // ack: long action, short confirmation
		body := g.words(200 + g.r.IntN(800))
		return `{"name":"write_file","arguments":{"path":"src/main.py","content":"` + body + `"}}`, "File written successfully."
	case 2: // empty observation body
		return g.pick(cmds), g.pick([]string{"{}", "[]", "  ", "—", ""})
	case 3: // reply: a small structured answer of comparable length
		return `{"name":"get_` + g.pick(english) + `","arguments":{"id":` + strconv.Itoa(g.r.IntN(999)) + `}}`,
			`{"status":"` + g.pick(english) + `","count":` + strconv.Itoa(g.r.IntN(99)) + `,"note":"` + g.words(3+g.r.IntN(5)) + `"}`
	case 4: // transform: part of the action reworked with new words
		a := g.words(16 + g.r.IntN(10))
		parts := strings.Fields(a)
		return `{"name":"edit","arguments":{"text":"` + a + `"}}`,
			"edited: " + strings.Join(parts[:len(parts)/2], " ") + " " + g.words(8+g.r.IntN(8))
	case 5: // context: a long observation that restates the action
		a := g.words(6 + g.r.IntN(6))
		return a, a + "\n" + a + "\n" + a + "\n" + g.words(20+g.r.IntN(20))
	}
	var a, o string
	switch d {
	case "terminal":
		c := g.pick(cmds)
		a = `[{"keystrokes":"` + c + `\n","duration":1.0}]`
		var b strings.Builder
		fmt.Fprintf(&b, "root@box:/srv/app# %s\n", c)
		for j := 0; j < 5+g.r.IntN(35); j++ {
			fmt.Fprintf(&b, "-rw-r--r-- 1 root root %6d %s.%s\n", g.r.IntN(99999), g.pick(english), g.pick([]string{"go", "py", "md", "json"}))
		}
		b.WriteString("root@box:/srv/app# ")
		o = b.String()
	case "search":
		q := g.words(3 + g.r.IntN(6))
		a = `{"name":"search","arguments":{"query":"` + q + `"}}`
		var b strings.Builder
		for j := 1; j <= 5+g.r.IntN(6); j++ {
			fmt.Fprintf(&b, "%d. [%s](https://example.org/%s/%d)\n   %s\n", j, g.words(6), g.pick(english), g.r.IntN(1000), g.words(30+g.r.IntN(40)))
		}
		o = b.String()
	case "android", "web", "os":
		a = fmt.Sprintf("click('%d')", g.r.IntN(500))
		var b strings.Builder
		for j := 0; j < 20+g.r.IntN(80); j++ {
			fmt.Fprintf(&b, "%s[%d] %s '%s'\n", strings.Repeat("  ", g.r.IntN(6)), g.r.IntN(900), g.pick([]string{"button", "link", "textbox", "StaticText", "heading"}), g.words(1+g.r.IntN(6)))
		}
		o = b.String()
	case "swe":
		a = `{"name":"edit_file","arguments":{"path":"pkg/` + g.pick(english) + `.go","old":"` + g.words(20) + `","new":"` + g.words(20) + `"}}`
		o = "diff --git a/pkg/x.go b/pkg/x.go\n@@ -10,7 +10,7 @@\n-" + g.words(20) + "\n+" + g.words(20) + "\n" + g.words(10+g.r.IntN(60))
	default: // mcp
		a = `{"name":"` + g.pick(english) + `_` + g.pick(english) + `","arguments":{"id":` + strconv.Itoa(g.r.IntN(9999)) + `}}`
		o = `{"content":[{"type":"text","text":"` + g.words(20+g.r.IntN(150)) + `"}],"isError":false}`
	}
	return a, o
}
